"""commands/flag_types.py: a count flag's 0 or negative is `kbert`'s one line naming the flag,
exit 2, refused while parsing, before any file is read; text that is no number stays argparse's
error."""

import argparse

import pytest

from keras_bert_impl.cli import main
from keras_bert_impl.commands.flag_types import FlagValueError, positive_int


def test_positive_int_takes_counts_and_refuses_the_rest():
    assert positive_int("1") == 1 and positive_int("64") == 64
    for bad in ("0", "-3"):
        with pytest.raises(FlagValueError, match=f"must be a positive integer. Received: {int(bad)}"):
            positive_int(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="invalid int value: '2.5'") as info:
        positive_int("2.5")
    assert not isinstance(info.value, FlagValueError)


FINETUNE = "finetune --task classification --train t --validation v --init i --output o"


@pytest.mark.parametrize(
    "argv, line",
    [
        ("search missing query -k 0", "kbert search: -k must be a positive integer. Received: 0"),
        (
            FINETUNE + " --batch-size -1",
            "kbert finetune: --batch-size must be a positive integer. Received: -1",
        ),
        ("embed f.txt --model m --output o.npy --batch-size 0", "kbert embed: --batch-size must be"),
        ("pretrain-data f.txt --vocab v --output o --workers 0", "kbert pretrain-data: --workers must be"),
    ],
)
def test_a_count_below_one_is_one_line_before_anything_is_read(argv, line, capsys):
    assert main(argv.split()) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(line), err


def test_text_that_is_no_number_is_argparse_own_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["search", "missing", "query", "-k", "ten"])
    assert info.value.code == 2 and "argument -k: invalid int value: 'ten'" in capsys.readouterr().err
