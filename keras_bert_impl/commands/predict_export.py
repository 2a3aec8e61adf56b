"""`kbert predict --model EXPORT`: a `kbert export` folder's classifier, run by keras_bert_lite on
LiteRT without TensorFlow (the process imports neither TensorFlow nor Keras: cli.main skips the
model imports for it, `is_export_folder`). fp32 runs the folder's float32 .tflite, int8 its
dynamic_int8 one (the files `--precision` runs in memory for a run folder); the rows are a run
folder's rows (`predict_rows`)."""

import os
import sys

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.predict_rows import blank_row, label_fields
from keras_bert_impl.precision_choice import AUTO
from keras_bert_impl.precisions import LITERT_QUANTIZATION
from keras_bert_lite.lite_text_classifier import MANIFEST


def is_export_folder(args):
    """Whether `kbert predict`'s --model is a `kbert export` folder (it holds export.json)."""
    model = getattr(args, "model", None)
    return isinstance(model, str) and os.path.isfile(os.path.join(model, MANIFEST))


def export_classifier(args, has_text_b):
    """(LiteTextClassifier of --model at --precision, its task), or a UsageError of one line."""
    from keras_bert_lite import LiteTextClassifier

    quantization = LITERT_QUANTIZATION.get(_precision(args))
    if quantization is None or args.runtime == "tensorflow":
        raise UsageError(
            f"--model {args.model} is a kbert export folder: its .tflite files run on litert at --precision "
            "fp32 or int8. Pass one of those (and no --runtime tensorflow), or --model the run folder."
        )
    try:
        classifier = LiteTextClassifier(
            args.model, quantization=quantization, sequence_length=args.seq_len, batch_size=args.batch_size
        )
    except ValueError as e:
        raise UsageError(f"--model {args.model}: {e}") from None
    task = _task(classifier)
    if has_text_b and not classifier.pair:
        raise UsageError(
            f"--text-b given, but {args.model} classifies single texts: leave out --text-b, or use the "
            "export of a model fine-tuned with --task pair."
        )
    return classifier, task


def route_classifier(args, route):
    """(LiteTextClassifier of a run folder's kept `LiteRoute`, its task): what the TensorFlow path
    ran there, with the resolver's line it said (lite_route.py)."""
    from keras_bert_lite import LiteTextClassifier

    manifest = route.manifest()
    if manifest["note"]:
        print(f"kbert {args.command}: {manifest['note']}", file=sys.stderr, flush=True)
    try:
        classifier = LiteTextClassifier(route.folder, manifest["quantization"], batch_size=args.batch_size)
    except (ValueError, OSError) as e:  # its file removed since `found`: the next run converts it again
        raise UsageError(
            f"--model {args.model}: its kept LiteRT file went missing ({e}); run the same command again."
        ) from None
    return classifier, _task(classifier)


def _task(classifier):
    return "pair" if classifier.pair else "multilabel" if classifier.multi_label else "classification"


def _precision(args):
    if args.precision != AUTO:
        return args.precision
    from keras_bert_impl.cpu_features import CpuFeatures
    from keras_bert_impl.precision_choice import NO_INT8_GAIN, choose_precision, int8_reason

    features = CpuFeatures.of_this_machine()
    precision, reason = choose_precision(features, "classification")
    if precision == "bf16":  # an export holds float32 and int8 files only
        int8 = int8_reason(features)
        precision = "int8" if int8 else "fp32"
        reason = f"{int8 or NO_INT8_GAIN}; an export holds no bf16 file"
    print(
        f"kbert {args.command}: --precision auto: {precision} on {features.describe()}, because {reason}.",
        file=sys.stderr,
        flush=True,
    )
    return precision


def export_rows(classifier, task, inputs, threshold, progress=None):
    """The rows of `inputs` ([(text, text_b or None)], (None, None) for a blank line), as a run
    folder's classifier gives them (`RowPredictor`), in order; `progress(n)` hears of each batch."""
    given = [(i, row) for i, row in enumerate(inputs) if row[0] is not None]
    texts = [a for _, (a, _) in given]
    outputs = (
        classifier.predict(texts, [b for _, (_, b) in given] if task == "pair" else None, progress)
        if texts
        else {}
    )
    from_logits = "logits" in outputs
    scores = outputs["logits"] if from_logits else outputs.get("probabilities", [])
    rows = [blank_row(task) for _ in inputs]
    for (index, (text, text_b)), score in zip(given, scores):
        fields = label_fields(task, threshold, classifier.label_names, score, from_logits)
        rows[index] = {"text": text, **fields, **({"text_b": text_b} if task == "pair" else {})}
    return rows
