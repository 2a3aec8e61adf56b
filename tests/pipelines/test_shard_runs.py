"""Sorted runs (keras_bert_impl/pipelines/shard_runs.py): a shard's records merged from its runs
come out as sorting them all would order them, and a run cut short is an error naming it."""

import random

import pytest

from keras_bert_impl.data.corpus_split import CorpusSplit
from keras_bert_impl.pipelines.shard_runs import merged_runs, read_run, run_name, write_run


def test_merged_runs_give_the_order_of_sorting_every_record(tmp_path):
    rng = random.Random(0)
    every, paths = [], []
    for index in range(3):
        # Some orders repeat across runs (ties fall back to the bytes, as sorted() breaks them).
        records = sorted(
            (rng.choice([7, 2**64 - 1, rng.getrandbits(64)]), rng.randbytes(rng.randint(0, 40)))
            for _ in range(50)
        )
        path = str(tmp_path / run_name(1, CorpusSplit(index, "corpus.txt", 100 * index, 100 * index + 99)))
        write_run(path, records)
        every += records
        paths.append(path)
    assert list(read_run(paths[0])) == sorted(every[:50])
    assert list(merged_runs(paths)) == sorted(every)


def test_a_run_cut_short_names_its_file(tmp_path):
    path = tmp_path / "00000-000000-000000000000000.run"
    write_run(str(path), [(1, b"abc"), (2, b"defgh")])
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(ValueError, match="00000-000000-000000000000000.run: the run ends inside a record"):
        list(read_run(str(path)))
