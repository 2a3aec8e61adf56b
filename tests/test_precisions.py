"""One precision vocabulary (keras_bert_impl/precisions.py): fp32, bf16, int8 for the flags and
the Python API alike; the other spellings of those precisions are refused naming the word to use."""

import pytest

from keras_bert_impl.cli import main
from keras_bert_impl.precisions import PRECISIONS, check_precision


def test_the_names_and_the_old_spellings():
    assert PRECISIONS == ("fp32", "bf16", "int8")
    assert [check_precision(p) for p in PRECISIONS] == list(PRECISIONS)
    for old, new in (
        ("float32", "fp32"),
        ("none", "fp32"),
        ("mixed_bfloat16", "bf16"),
        ("bfloat16", "bf16"),
        ("dynamic_int8", "int8"),
    ):
        with pytest.raises(
            ValueError,
            match=rf"^precision '{old}' is spelled '{new}' here \(one name per precision: "
            r"fp32, bf16, int8\)\.$",
        ):
            check_precision(old)
    with pytest.raises(
        ValueError, match=r"precision must be one of \['fp32', 'bf16'\]. Received: precision='int8'"
    ):
        check_precision("int8", choices=("fp32", "bf16"))
    with pytest.raises(
        ValueError, match=r"precision must be one of \['fp32', 'bf16', 'int8'\]. Received: precision='fp16'"
    ):
        check_precision("fp16")


def test_each_precision_runs_on_its_runtimes():
    from keras_bert_impl.precisions import RUNTIMES, check_runtime

    assert RUNTIMES == {"fp32": ("tensorflow", "litert"), "bf16": ("tensorflow",), "int8": ("litert",)}
    assert [check_runtime(p) for p in PRECISIONS] == ["tensorflow", "tensorflow", "litert"]
    assert check_runtime("fp32", "litert") == "litert" and check_runtime("int8", "litert") == "litert"
    with pytest.raises(
        ValueError,
        match=r"^runtime tensorflow runs precision fp32 or bf16; int8 runs on litert only\. "
        r"Received: runtime='tensorflow' with precision='int8': leave runtime out, or pick precision "
        r"fp32 or bf16\.$",
    ):
        check_runtime("int8", "tensorflow")
    with pytest.raises(
        ValueError, match=r"runtime must be one of \['tensorflow', 'litert'\]. Received: runtime='onnx'"
    ):
        check_runtime("fp32", "onnx")


def test_the_inference_package_exports_the_same_names():
    from keras_bert_impl.inference import PRECISIONS as exported

    assert exported is PRECISIONS


@pytest.mark.parametrize("command", [["predict", "a film"], ["evaluate", "--data", "dev.csv"]])
def test_the_flag_refuses_old_spellings_naming_the_new_one(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command[0], "--model", "run", "--precision", "float32", *command[1:]])
    assert exit_info.value.code == 2
    assert "argument --precision: --precision 'float32' is spelled 'fp32' here" in capsys.readouterr().err


REQUIRED = {
    "finetune": ["--task", "classification", "--train", "t.csv", "--init", "m.keras", "--output", "run"],
    "distill": ["--teacher", "run", "--student-preset", "bert_tiny", "--output", "student"],
    "pretrain": ["--vocab", "vocab.txt", "--corpus", "corpus.txt", "--output", "run"],
}


@pytest.mark.parametrize("command", sorted(REQUIRED))
def test_training_commands_take_the_same_words_and_the_old_flag_with_a_note(command, capsys):
    from keras_bert_impl.cli import build_parser

    parser = build_parser()
    parse = lambda *flags: parser.parse_args([command, *REQUIRED[command], *flags])  # noqa: E731
    assert parse().precision == "fp32"
    assert parse("--precision", "fp16").precision == "fp16"
    assert capsys.readouterr().err == ""
    for old, new in (("none", "fp32"), ("bf16", "bf16"), ("fp16", "fp16")):
        assert parse("--mixed-precision", old).precision == new
        assert capsys.readouterr().err == (
            f"kbert {command}: --mixed-precision {old} is now spelled --precision {new}; running with "
            f"--precision {new}.\n"
        )
    for value, expected in (
        (
            "mixed_float16",
            "'mixed_float16' is spelled 'fp16' here (one name per precision: fp32, bf16, fp16)",
        ),
        ("int8", "--precision must be one of ['fp32', 'bf16', 'fp16']. Received: --precision='int8'"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            parse("--precision", value)
        assert exit_info.value.code == 2
        assert expected in capsys.readouterr().err
    assert "mixed_precision" not in vars(parse())  # one name: the old flag only sets --precision


def test_full_int8_is_refused_naming_int8_mixed_and_the_integer_only_files(tmp_path, capsys):
    """Issue 31: the file once called full_int8 keeps most ops float; its new name says so, and the
    old one is refused (library and flag alike) before any model is read."""
    from keras_bert_impl.conversion.input_contract import QUANTIZATIONS, check_quantization

    assert "int8_mixed" in QUANTIZATIONS and "full_int8" not in QUANTIZATIONS
    message = (
        r"quantization 'full_int8' is called 'int8_mixed' now: it keeps softmax, LayerNorm and most matmuls "
        r"in float, so it is not integer-only \(for that, int8_only or int16x8_only\)\."
    )
    with pytest.raises(ValueError, match="^" + message + "$"):
        check_quantization("quantization", "full_int8")
    with pytest.raises(ValueError, match=r"must be one of .*Received: quantization='int9'"):
        check_quantization("quantization", "int9")
    assert (
        main(
            [
                "export",
                "--model",
                str(tmp_path / "absent.keras"),
                "--output",
                str(tmp_path / "out"),
                "--quantizations",
                "float32,full_int8",
            ]
        )
        == 2
    )
    assert "--quantizations 'full_int8' is called 'int8_mixed' now" in capsys.readouterr().err
