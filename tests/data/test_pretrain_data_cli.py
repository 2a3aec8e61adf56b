"""`kbert pretrain-data` (keras_bert_impl/commands/pretrain_data.py) end to end, and its errors."""

import argparse
import json
import os

import pytest

from keras_bert_impl.commands import pretrain_data
from keras_bert_impl.data import PretrainingRecordReader


def run_cli(*argv):
    parser = argparse.ArgumentParser(prog="kbert")
    pretrain_data.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["pretrain-data", *map(str, argv)])
    return args.func(args)


def test_cli_writes_shards(review_subset_file, vocab_path, tmp_path, capsys):
    out = tmp_path / "out"
    assert (
        run_cli(
            review_subset_file,
            "--vocab",
            vocab_path,
            "--output",
            out,
            "--dupe-factor",
            1,
            "--num-shards",
            2,
            "--whole-word-masking",
            "--max-predictions",
            18,
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "Read 300 documents" in printed and "2 shard(s)" in printed
    metadata = json.loads((out / "pretraining.json").read_text())
    assert (
        metadata["whole_word_masking"]
        and metadata["max_predictions_per_seq"] == 18
        and metadata["examples"] > 2000
    )
    x, y, _ = next(iter(PretrainingRecordReader.from_directory(out).dataset(batch_size=4)))
    assert x["mask_positions"].shape == (4, 18)
    assert not [p for p in os.listdir(out) if p.startswith(".tmp-")]


def test_cli_reads_the_reviews_csv(vocab_path, tmp_path, capsys):
    from tests.data.helpers import REVIEWS

    csv_path = tmp_path / "few.csv"
    with open(REVIEWS, encoding="utf-8-sig") as f:
        text = f.read()
    # The first ~20 reviews (rows end at a quote followed by a line break).
    csv_path.write_text('"\n'.join(text.split('"\n')[:20]) + '"\n', encoding="utf-8")
    assert (
        run_cli(
            csv_path,
            "--format",
            "reviews-csv",
            "--vocab",
            vocab_path,
            "--output",
            tmp_path / "o",
            "--dupe-factor",
            1,
            "--dynamic-masking",
            "--quiet",
        )
        == 0
    )
    assert "unmasked (dynamic masking)" in capsys.readouterr().out


BAD_SETTINGS = [
    (
        ["--max-predictions", "0"],
        "--max-predictions must be a positive integer. Received: --max-predictions=0",
    ),
    (
        ["--masked-lm-prob", "0"],
        r"--masked-lm-prob must be a number in (0, 1). Received: --masked-lm-prob=0.0",
    ),
    (["--masked-lm-prob", "1.2"], "--masked-lm-prob=1.2"),
    (["--short-seq-prob", "2"], "--short-seq-prob=2.0"),
    (["--seq-len", "4"], "--seq-len=4"),
    (["--dupe-factor", "0"], "--dupe-factor=0"),
    (["--num-shards", "0"], "--num-shards=0"),
]


def test_cli_rejects_bad_settings(review_subset_file, vocab_path, tmp_path, capsys):
    for extra, message in BAD_SETTINGS:
        assert run_cli(review_subset_file, "--vocab", vocab_path, "--output", tmp_path / "o", *extra) == 2, (
            extra
        )
        err = capsys.readouterr().err
        assert err.startswith("kbert pretrain-data: ") and message in err, (extra, err)
        assert not (tmp_path / "o").exists() or not os.listdir(tmp_path / "o")


def test_the_old_spellings_of_the_length_flags_still_work_with_a_note(
    review_subset_file, vocab_path, tmp_path, capsys
):
    # Google's create_pretraining_data.py names; every other kbert command says --seq-len / --max-predictions.
    out = tmp_path / "out"
    assert (
        run_cli(
            review_subset_file,
            "--vocab",
            vocab_path,
            "--output",
            out,
            "--dupe-factor",
            1,
            "--num-shards",
            1,
            "--max-seq-length",
            40,
            "--max-predictions-per-seq",
            6,
            "--quiet",
        )
        == 0
    )
    notes = capsys.readouterr().err.strip().splitlines()
    assert notes == [
        "kbert pretrain-data: --max-seq-length is now spelled --seq-len; running with --seq-len 40.",
        "kbert pretrain-data: --max-predictions-per-seq is now spelled --max-predictions; "
        "running with --max-predictions 6.",
    ]
    metadata = json.loads((out / "pretraining.json").read_text())
    assert (metadata["max_seq_length"], metadata["max_predictions_per_seq"]) == (40, 6)


def test_cli_rejects_bad_inputs(review_subset_file, vocab_path, tmp_path, capsys):
    def error(*argv):
        assert run_cli(*argv) == 2
        return capsys.readouterr().err

    out = ["--output", tmp_path / "o"]
    assert "Input file(s) not found: ['" in error(tmp_path / "missing.txt", "--vocab", vocab_path, *out)
    assert "is a directory" in error(tmp_path, "--vocab", vocab_path, *out)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n\n", encoding="utf-8")
    assert "The input has no text" in error(empty, "--vocab", vocab_path, *out)
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"PK\x03\x04\xff\xfe\x00")
    assert "is not UTF-8 text" in error(binary, "--vocab", vocab_path, *out)
    bad_vocab = tmp_path / "vocab.txt"
    bad_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", encoding="utf-8")
    assert "lacks BERT's special tokens ['[MASK]']" in error(review_subset_file, "--vocab", bad_vocab, *out)
    assert "No vocabulary at" in error(review_subset_file, "--vocab", tmp_path / "nope.txt", *out)
    # An existing output is never clobbered without --overwrite.
    assert run_cli(review_subset_file, "--vocab", vocab_path, *out, "--dupe-factor", 1, "--quiet") == 0
    capsys.readouterr()
    assert "--overwrite" in error(review_subset_file, "--vocab", vocab_path, *out, "--dupe-factor", 1)
    with pytest.raises(SystemExit):
        run_cli(review_subset_file, "--vocab", vocab_path, *out, "--format", "pdf")


def test_cli_refuses_a_reviews_csv_whose_quotes_merge_or_split_rows(vocab_path, tmp_path, capsys):
    """A quote left open used to swallow the next row into a wider one, of which the last field
    was taken: the review vanished without a word."""
    rows = [
        '"1","A fine film. I liked it."',
        '"-1","Boring. Avoid.',
        '"1","Great acting. Superb score."',
        '"-1","Dull. Too long."',
    ]
    open_quote = tmp_path / "open_quote.csv"
    open_quote.write_text("\n".join(rows) + "\n", encoding="utf-8")
    args = ("--format", "reviews-csv", "--vocab", vocab_path, "--output", tmp_path / "o", "--quiet")
    assert run_cli(open_quote, *args) == 2
    err = capsys.readouterr().err
    assert f"{open_quote}: malformed CSV near row 2 (line 3)" in err and "written twice" in err, err
    # A row as wide as no other (an unquoted comma): named, not read.
    wide = tmp_path / "wide.csv"
    wide.write_text('"1","Fine."\n-1,Slow, and dull.\n"1","Good."\n', encoding="utf-8")
    assert run_cli(wide, *args) == 2
    err = capsys.readouterr().err
    assert f"{wide} row 2 (ending at line 2) has 3 field(s) where the first row has 2" in err, err
    assert not (tmp_path / "o").exists() or not os.listdir(tmp_path / "o")
