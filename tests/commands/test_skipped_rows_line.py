"""`--on-error skip` through a kbert command: the rows skipped are counted on stderr once, in the
command's words. The reader's own summary (a logging warning, for Python users) reached stderr
too through logging's last-resort handler, since the CLI configures no logging: two lines for one
fact, the second without the `kbert CMD:` prefix or the flag's name."""

import subprocess
import sys

import pytest

from tests.conftest import REPO

SCRIPT = r"""
import sys
from keras_bert_impl.commands.task_data import read_checked
from keras_bert_impl.data.readers import ClassificationReader
from keras_bert_impl.tokenization import BertPreprocessor

reader = ClassificationReader(BertPreprocessor("data/minilm/vocab.txt", sequence_length=16), header=False,
                              column_names=["label", "text"], label_column="label", on_error="skip")
read_checked(reader, sys.argv[1], "--train", "finetune")
"""


@pytest.mark.slow  # about 20 s or more: a child process imports TensorFlow and reads the rows
def test_skipped_rows_are_one_line_on_stderr(data_dir, tmp_path):
    rows = tmp_path / "train.csv"
    rows.write_text('"1","a gripping , funny film"\n"-1",""\n"-1","dull and slow"\n', encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(rows)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert lines == [
        f"kbert finetune: --train {rows}: skipped 1 malformed row(s) (empty_text 1); the first, "
        "line 2: column 'text' is empty: give the row its text, or remove the row"
    ], result.stderr[-2000:]
