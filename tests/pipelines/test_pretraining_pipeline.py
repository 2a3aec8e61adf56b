"""`kbert pretrain-data --runner direct` (keras_bert_impl/pipelines/) against the one-process
command: the same multiset of examples for the same seed, on the real reviews."""

import json
import os

import pytest

from tests.pipelines.conftest import review_documents, write_text_shards
from tests.pipelines.helpers import kbert, records


def pretrain_data(files, vocab, output, *extra):
    return kbert(
        "pretrain-data",
        files,
        "--vocab",
        vocab,
        "--output",
        output,
        "--dupe-factor",
        2,
        "--num-shards",
        3,
        "--quiet",
        "--whole-word-masking",
        "--seed",
        7,
        *extra,
    )


def test_corpus_splits_read_the_documents_of_the_whole_file(tmp_path):
    """Every split size gives back the corpus' own documents, once each, keys unique: a
    document belongs to the split of the blank line before it, wherever the cuts fall."""
    from keras_bert_impl.data import PretrainingCorpus, documents_to_text

    documents = review_documents(60)
    # Runs of blank and whitespace-only lines, a byte-order mark and no final newline.
    text = "\ufeff" + documents_to_text(documents).replace("\n\n", "\n \n\n", 20).rstrip("\n")
    path = tmp_path / "reviews.txt"
    path.write_text(text, encoding="utf-8")
    corpus = PretrainingCorpus(str(path))
    whole = list(corpus)
    assert len(whole) == 60
    for split_bytes in (53, 997, 4096, len(text.encode()), None):
        keyed = [item for split in corpus.splits(split_bytes) for item in corpus.keyed_documents(split)]
        assert [document for _, document in keyed] == whole, split_bytes
        assert len({key for key, _ in keyed}) == 60, split_bytes


def test_direct_runner_one_worker_equals_the_one_process_command(vocab_path, tmp_path):
    files = write_text_shards(tmp_path / "in", review_documents(80), files=2)
    local, beam = tmp_path / "local", tmp_path / "beam"
    assert pretrain_data(files, vocab_path, local, "--randomness", "keyed", "--split-bytes", 20000) == 0
    assert pretrain_data(files, vocab_path, beam, "--runner", "direct", "--split-bytes", 20000) == 0
    expected = records(local)
    assert sum(expected.values()) > 1000 and records(beam) == expected
    written = json.loads((beam / "pretraining.json").read_text())
    assert written["randomness"] == "keyed" and written["examples"] == sum(expected.values())
    assert sorted(os.listdir(beam)) == sorted(os.listdir(local))  # no staging folder or temporary file left


def test_keyed_examples_do_not_depend_on_the_order_splits_are_built_in(vocab_path, tmp_path):
    """What makes the worker count irrelevant: each split's examples depend on the split alone."""
    from keras_bert_impl.data import PretrainingCorpus, PretrainingExampleBuilder

    corpus = PretrainingCorpus(write_text_shards(tmp_path / "in", review_documents(40), files=1))
    builder = PretrainingExampleBuilder(
        vocab_path, dupe_factor=2, randomness="keyed", split_bytes=8000, seed=3
    )
    splits = corpus.splits(builder.split_bytes)
    assert len(splits) >= 3
    forward = sorted(str(builder.to_example(i)) for i in builder.instances(corpus))
    backward = sorted(
        str(builder.to_example(i)) for s in reversed(splits) for _, i in builder.split_instances(corpus, s)
    )
    assert forward == backward
    # and the seed matters
    other = PretrainingExampleBuilder(vocab_path, dupe_factor=2, randomness="keyed", split_bytes=8000, seed=4)
    assert sorted(str(other.to_example(i)) for i in other.instances(corpus)) != forward


@pytest.mark.slow
def test_direct_runner_two_workers_equals_the_one_process_command(vocab_path, tmp_path):
    """Two worker processes (Beam's multi_processing mode), 300 reviews in 3 files cut into
    splits: the same examples as the one-process command, byte for byte."""
    files = write_text_shards(tmp_path / "in", review_documents(300), files=3)
    local, beam = tmp_path / "local", tmp_path / "beam"
    assert pretrain_data(files, vocab_path, local, "--randomness", "keyed", "--split-bytes", 60000) == 0
    assert (
        pretrain_data(files, vocab_path, beam, "--runner", "direct", "--workers", 2, "--split-bytes", 60000)
        == 0
    )
    expected = records(local)
    assert sum(expected.values()) > 5000 and records(beam) == expected


def test_bad_inputs_are_one_line_before_any_worker(vocab_path, tmp_path, capsys):
    files = write_text_shards(tmp_path / "in", review_documents(3), files=1)
    os.symlink("/proc/self/mem", tmp_path / "in" / "unreadable.txt")  # open() works, read() fails: EIO
    cases = [
        ([str(tmp_path / "nothing-*.txt")], [], "Input file(s) not found"),
        ([str(tmp_path / "in" / "unreadable.txt")], [], "cannot be read"),
        ([files], ["--randomness", "stream"], "--randomness stream"),
        ([files], ["--workers", "0"], "--workers must be a positive integer. Received: 0"),
        ([files], ["--split-bytes", "0"], "--split-bytes=0"),
    ]
    for inputs, extra, message in cases:
        code = kbert(
            "pretrain-data",
            *inputs,
            "--vocab",
            vocab_path,
            "--output",
            tmp_path / "o",
            "--runner",
            "direct",
            *extra,
        )
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (extra, err)
    assert not (tmp_path / "o").exists()
    assert (
        kbert("pretrain-data", files, "--vocab", vocab_path, "--output", tmp_path / "o", "--workers", 2) == 2
    )
    assert "--workers needs a Beam runner" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:  # argparse's own error without a runner, as before
        kbert("pretrain-data", files, "--vocab", vocab_path, "--output", tmp_path / "o", "--project=p")
    assert exit_info.value.code == 2 and "unrecognized arguments: --project=p" in capsys.readouterr().err
