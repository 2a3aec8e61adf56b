"""`--precision` of `kbert predict` and `kbert evaluate`: one flag, one meaning in both.

Imported while the parser is built, so it imports nothing heavy at module level (`kbert
--help` answers before TensorFlow loads).
"""

from keras_bert_impl.commands.errors import UsageError

CHOICES = ("fp32", "bf16", "int8")
TEXT_CLASSIFIER_TASKS = ("classification", "pair", "multilabel")


def add_precision_flag(parser):
    parser.add_argument(
        "--precision", default="fp32", choices=CHOICES,
        help="bf16: compute in bfloat16 (Keras' mixed_bfloat16; fast on CPUs with AVX512-BF16). int8: the "
        "classifier converted in memory to TFLite's dynamic-range int8 and run on XNNPACK (about 10 s to "
        "convert MiniLM-L6; fast on CPUs with AVX512-VNNI; classification, pair and multilabel models). "
        "Labels nearly always fp32's: bench/results/inference_precision.json. Default fp32.")


def model_in_precision(model, precision, task):
    """The model to run: a bf16 copy for --precision bf16 (any task); for int8 the model
    itself, which `TextPredictor(..., precision="int8")` converts; int8 refused for the token
    and span heads, whose outputs TextPredictor does not batch."""
    if precision == "int8" and task not in TEXT_CLASSIFIER_TASKS:
        raise UsageError(
            f"--precision int8 runs classification, pair and multilabel models; this model's task is {task}. "
            "Use --precision fp32 or bf16."
        )
    if precision == "bf16":
        from keras_bert_impl.inference import with_precision

        return with_precision(model, "bf16")
    return model


def predictor_precision(precision):
    """TextPredictor's `precision` for a model that `model_in_precision` already prepared."""
    return "int8" if precision == "int8" else "fp32"
