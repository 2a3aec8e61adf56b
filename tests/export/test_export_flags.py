"""`kbert export` takes a flag only where the chosen --formats and --quantizations use it: for
every flag, a combination that uses it is accepted and one that does not is refused in one line
naming it, before the model loads (a `--calibration nope.csv` that nothing read exited 0). And
the flags' values are named in their errors, never Python's words."""

import os

import keras
import pytest

import keras_bert_impl as kb
from keras_bert_impl.cli import build_parser, main
from keras_bert_impl.commands.export import check_flags
from tests.harness import minilm_vocab_backbone


def _tiny_classifier():
    return kb.BertClassifier(minilm_vocab_backbone(), num_classes=2, label_names=["neg", "pos"])


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny classifier and a tiny quantization-aware one, saved as .keras files."""
    folder = tmp_path_factory.mktemp("models")
    classifier = _tiny_classifier()
    paths = {"float": str(folder / "tiny.keras"), "qat": str(folder / "qat.keras")}
    classifier.save(paths["float"])
    kb.QuantizationAwareClassifier(classifier).save(paths["qat"])
    return paths


TABLE = [
    # flag, a combination that uses it, one that does not
    (
        "--quantizations",
        ["--formats", "tflite", "--quantizations", "float32"],
        ["--formats", "saved_model", "--quantizations", "float32"],
    ),
    (
        "--quantizations",
        ["--formats", "mediapipe", "--quantizations", "float32,int8_only"],
        ["--formats", "mediapipe", "--quantizations", "float32,int8_mixed"],
    ),
    (
        "--quantizations",
        ["--formats", "tflite", "--quantizations", "float16"],
        ["--formats", "huggingface", "--quantizations", "float16"],
    ),
    (
        "--validation",
        ["--formats", "saved_model", "--validation", "V"],
        ["--formats", "huggingface", "--validation", "V"],
    ),
    (
        "--calibration",
        ["--formats", "tflite", "--quantizations", "int8_mixed", "--calibration", "C"],
        ["--formats", "tflite", "--quantizations", "float32", "--calibration", "C"],
    ),
    (
        "--calibration",
        ["--formats", "mediapipe", "--quantizations", "int8_only", "--calibration", "C"],
        ["--formats", "saved_model,text_tflite", "--calibration", "C"],
    ),
    (
        "--seq-len",
        ["--formats", "saved_model", "--seq-len", "16"],
        ["--formats", "huggingface", "--seq-len", "16"],
    ),
    (
        "--seq-len",
        ["--formats", "sentence_transformers", "--seq-len", "16"],
        ["--formats", "huggingface", "--seq-len", "16"],
    ),
    (
        "--static-lengths",
        ["--formats", "tflite", "--quantizations", "float16_gpu", "--static-lengths", "16"],
        ["--formats", "tflite", "--quantizations", "float32", "--static-lengths", "16"],
    ),
    ("--name", ["--formats", "saved_model", "--name", "x"], ["--formats", "huggingface", "--name", "x"]),
    ("--pair", ["--formats", "saved_model", "--pair"], ["--formats", "sentence_transformers", "--pair"]),
    (
        "--pooling",
        ["--formats", "sentence_transformers", "--pooling", "cls"],
        ["--formats", "saved_model", "--pooling", "cls"],
    ),
    (
        "--normalize",
        ["--formats", "sentence_transformers", "--no-normalize"],
        ["--formats", "tflite", "--normalize"],
    ),
    (
        "--peft-adapter",
        ["--formats", "huggingface", "--peft-adapter"],
        ["--formats", "saved_model", "--peft-adapter"],
    ),
    (
        "--repeats",
        ["--formats", "saved_model", "--validation", "V", "--repeats", "2"],
        ["--formats", "saved_model", "--repeats", "2"],
    ),
    *[
        (
            flag,
            ["--formats", "saved_model", "--validation", "V", flag, *value],
            ["--formats", "saved_model", flag, *value],
        )
        for flag, value in (
            ("--format", ["csv"]),
            ("--text-column", ["t"]),
            ("--text-b-column", ["b"]),
            ("--label-column", ["l"]),
            ("--columns", ["label,text"]),
            ("--tag-format", ["word/tag"]),
            ("--tag-column", ["1"]),
            ("--doc-stride", ["32"]),
            ("--max-query-length", ["16"]),
            ("--header", []),
            ("--no-header", []),
            ("--on-error", ["skip"]),
        )
    ],
    (
        "--columns",
        ["--formats", "tflite", "--quantizations", "int16x8_only", "--calibration", "C", "--columns", "a,b"],
        ["--formats", "huggingface", "--columns", "a,b"],
    ),
]


def _argv(model, tmp_path, extra):
    files = {"V": str(tmp_path / "validation.csv"), "C": str(tmp_path / "calibration.csv")}
    return ["export", "--model", model, "--output", str(tmp_path / "out"), *[files.get(a, a) for a in extra]]


@pytest.fixture
def no_model_loads(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the flags were checked")

    monkeypatch.setattr(keras.saving, "load_model", refuse)


@pytest.mark.parametrize("flag, used, unused", TABLE, ids=[f"{row[0]}-{i}" for i, row in enumerate(TABLE)])
def test_every_flag_is_refused_where_the_combination_does_not_use_it(
    flag, used, unused, models, tmp_path, capsys, no_model_loads
):
    check_flags(build_parser().parse_args(_argv(models["float"], tmp_path, used)))  # accepted: no UsageError
    assert main(_argv(models["float"], tmp_path, unused)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kbert export: ") and flag in err[0], err
    assert not os.path.exists(tmp_path / "out")


def test_the_calibration_a_quantization_aware_int8_only_never_reads_is_refused(
    models, tmp_path, capsys, no_model_loads
):
    # Its int8_only takes the ranges it learned; the file was accepted and never read.
    assert (
        main(
            _argv(
                models["qat"],
                tmp_path,
                ["--formats", "tflite", "--quantizations", "int8_only", "--calibration", "C"],
            )
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err == (
        "kbert export: --formats tflite with --quantizations int8_only uses no --calibration (--calibration "
        "is for int8_mixed and the integer-only files (a quantization-aware model's int8_only takes the "
        "ranges it learned)). Leave it out, or ask for a file that uses it."
    ), err
    # Its int16x8_only is its float classifier's, post-training: that one calibrates.
    check_flags(
        build_parser().parse_args(
            _argv(
                models["qat"],
                tmp_path,
                ["--formats", "tflite", "--quantizations", "int16x8_only", "--calibration", "C"],
            )
        )
    )
    check_flags(
        build_parser().parse_args(
            _argv(models["qat"], tmp_path, ["--formats", "tflite", "--quantizations", "int8_only"])
        )
    )


def test_calibration_with_float32_is_refused_where_the_file_does_not_exist(
    models, tmp_path, capsys, no_model_loads
):
    assert (
        main(_argv(models["float"], tmp_path, ["--quantizations", "float32", "--calibration", "nope.csv"]))
        == 2
    )
    assert "uses no --calibration" in capsys.readouterr().err


def test_every_flag_of_kbert_export_is_in_the_table():
    parser = next(
        action
        for action in build_parser()._subparsers._group_actions[0].choices.items()
        if action[0] == "export"
    )[1]
    flags = {option for action in parser._actions for option in action.option_strings}
    always_used = {"-h", "--help", "--model", "--output", "--formats", "--overwrite", "--no-normalize"}
    assert flags - always_used == {row[0] for row in TABLE}


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--formats", "tflite", "--quantizations", "float16_gpu", "--static-lengths", "²"],
            "kbert export: --static-lengths takes comma-separated lengths in wordpieces, e.g. 64,128. "
            "Received: '²'",
        ),
        (
            ["--formats", "huggingface,huggingface"],
            "kbert export: --formats names huggingface more than once. "
            "Received: 'huggingface,huggingface'; give each once.",
        ),
        (
            ["--formats", "tflite,tflite", "--quantizations", "float32,float32"],
            "kbert export: --formats names tflite more than once. Received: 'tflite,tflite'; give each once.",
        ),
    ],
)
def test_flag_values_are_named_in_their_errors(extra, message, models, tmp_path, capsys, no_model_loads):
    # "²" was taken for a digit and gave int()'s "invalid literal"; huggingface twice said to run
    # once more "for the other formats", of which there were none.
    assert main(_argv(models["float"], tmp_path, extra)) == 2
    assert capsys.readouterr().err.strip() == message


def test_a_task_file_of_unknown_extension_names_the_format_flag(models, tmp_path, capsys):
    # It said "pass file_format= one of ['csv', 'tsv', 'jsonl']": Python's argument, not the flag.
    rows = tmp_path / "rows.txt"
    rows.write_text("1,a fine film\n0,a dull film\n", encoding="utf-8")
    fix = "from its extension '.txt': pass --format, one of ['csv', 'tsv', 'jsonl']."
    assert (
        main(
            _argv(
                models["float"],
                tmp_path,
                [
                    "--formats",
                    "tflite",
                    "--quantizations",
                    "int8_mixed",
                    "--calibration",
                    str(rows),
                    "--no-header",
                    "--columns",
                    "label,text",
                ],
            )
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"kbert export: --calibration {rows}: ") and fix in err[0], err
    assert (
        main(
            [
                "evaluate",
                "--model",
                models["float"],
                "--data",
                str(rows),
                "--no-header",
                "--columns",
                "label,text",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"kbert evaluate: --data {rows}: ") and fix in err[0], err
