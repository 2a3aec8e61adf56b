"""`kbert export`'s work: every artifact of one model in one folder, written atomically.

Layout of the output folder (NAME from --name):

    serving/NAME/1/          SavedModel, raw text in (tensorflow-text ops), TF Serving layout
    serving/NAME_ids/1/      SavedModel, token ids in, no tensorflow-text op
    tflite/NAME_QUANT.tflite ids in, any batch and length, builtin ops only
    mediapipe/NAME*.tflite   [1, S] ids in, one output, with MediaPipe Tasks metadata: NAME.tflite
                             float32, NAME_float16, NAME_int8 (dynamic range)
    text/NAME_text_in.tflite strings in, tensorflow-text's tokenizer inside (custom ops)
    vocab.txt, labels.txt    the model's vocabulary and label names
    export.json              what was written, inputs and outputs, casing, sequence length

Everything is built in a sibling folder `OUTPUT.partial-PID` and renamed into place at the
end, so a killed export leaves no half-written OUTPUT (the next run deletes the leftover).
"""

import contextlib
import glob
import os
import shutil
import time

import numpy as np
import tensorflow as tf

from keras_bert_impl.atomic_write import replace_folder, write_json_atomically, write_text_atomically
from keras_bert_impl.conversion.tflite_converter import (
    check_builtins_only,
    convert_endpoint,
    convert_saved_model,
)
from keras_bert_impl.conversion.input_contract import (
    CALIBRATED_QUANTIZATIONS,
    EXPORT_FORMATS,
    QUANTIZATIONS,
    STATIC_QUANTIZATIONS,
    check_quantization,
)
from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS, MEDIAPIPE_OUTPUTS
from keras_bert_impl.conversion.integer_only import convert_static
from keras_bert_impl.models import QuantizationAwareClassifier
from keras_bert_impl.tokenization import BertPreprocessor
from keras_bert_impl.validation import check_choice, check_sequence_length
from keras_bert_impl_export.export_signatures import ExportSignatures
from keras_bert_impl_export.warmup import write_warmup_requests

MANIFEST = "export.json"
# Examples the calibration of int8_mixed and the integer-only files runs (Model Garden's and TFLite's guides use 100-500).
CALIBRATION_EXAMPLES = 200
WARMUP_EXAMPLES = 4


class ExportExistsError(FileExistsError):
    pass


def prepare_output(output, overwrite):
    """Checks OUTPUT and clears the leftovers of killed exports; returns the work folder."""
    output = os.path.abspath(output)
    if os.path.exists(output) and not (os.path.isdir(output) and not os.listdir(output)):
        if not overwrite:
            raise ExportExistsError(
                f"--output {output} already exists{' and holds an export' if os.path.exists(os.path.join(output, MANIFEST)) else ''}. "
                "Pass --overwrite to replace it, or choose another folder."
            )
    for leftover in glob.glob(glob.escape(output) + ".partial-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    work = f"{output}.partial-{os.getpid()}"
    os.makedirs(work)
    return work


@contextlib.contextmanager
def output_folder(output, overwrite):
    """The work folder of an export to OUTPUT (`prepare_output`): renamed into place when the
    block ends (`commit_output`), removed if it raises, so OUTPUT appears whole or not at all."""
    work = prepare_output(output, overwrite)
    try:
        yield work
        commit_output(work, output)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def commit_output(work, output):
    """Renames the finished work folder to OUTPUT (the old export, if any, goes last)."""
    replace_folder(work, output)


def id_examples(serving, texts, sequence_length=None):
    """Texts (or (a, b) pairs) -> [{ids, mask, segment_ids}] int32 arrays [1, S], one per example."""
    x = tokenize(serving, texts, sequence_length)
    return [{name: x[name][i : i + 1] for name in EXPORT_ID_INPUTS} for i in range(len(x["ids"]))]


def tokenize(serving, texts, sequence_length=None):
    """Texts (or (a, b) pairs) -> {ids, mask, segment_ids} int32 arrays [N, S]; S is the
    export's length, or `sequence_length` (a static file's own length)."""
    if serving.pair:
        segments = (tf.constant([a for a, _ in texts]), tf.constant([b for _, b in texts]))
    else:
        segments = tf.constant(list(texts))
    preprocessor = serving.preprocessor
    if sequence_length not in (None, serving.sequence_length):
        preprocessor = BertPreprocessor.from_model(serving.model, sequence_length=sequence_length)
    x = preprocessor(segments)
    return {
        "ids": x["token_ids"].numpy(),
        "mask": x["padding_mask"].numpy(),
        "segment_ids": x["segment_ids"].numpy(),
    }


def text_request(serving, texts):
    if serving.pair:
        return {serving.text_inputs[0]: [a for a, _ in texts], serving.text_inputs[1]: [b for _, b in texts]}
    return {"text": list(texts)}


def export_model(
    model,
    output,
    *,
    name="bert",
    sequence_length=128,
    pair=False,
    formats=EXPORT_FORMATS,
    quantizations=QUANTIZATIONS,
    calibration_texts=None,
    static_lengths=None,
    overwrite=False,
    finish=None,
    log=print,
):
    """Writes every artifact of `model` under `output`; returns the manifest (export.json).

    Args:
        model: a head with its vocabulary (see ExportSignatures), or a
            `QuantizationAwareClassifier`: its int8_only files take the ranges it learned (no
            calibration), every other file is its float classifier's.
        output: the folder to create (refused if it holds anything, unless `overwrite`).
        name: the model name in TF Serving's layout and the file names.
        sequence_length, pair: see ExportSignatures.
        formats: a subset of EXPORT_FORMATS.
        quantizations: the .tflite precisions (QUANTIZATIONS, and for a classifier the
            STATIC_QUANTIZATIONS: the GPU file and the integer-only ones, static [1, S]).
        calibration_texts: real examples of the task (texts, or (a, b) pairs): the
            calibration of CALIBRATED_QUANTIZATIONS and the warm-up requests. Required for those.
        static_lengths: None (the static files at `sequence_length`), or the lengths S to
            write each static file at, one file per length, named `{name}_{quantization}_{S}`
            (an app picks the shortest that fits its text instead of resizing tensors).
        overwrite: replace an existing OUTPUT.
        finish: called with (work folder, manifest) before the rename, to add files (the report).
        log: progress lines go here.
    """
    for fmt in formats:
        check_choice("formats", fmt, EXPORT_FORMATS)
    for quantization in quantizations:
        check_quantization("quantizations", quantization)
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(
            f"name must be letters, digits, '-' or '_' (a TF Serving model name). Received: name={name!r}"
        )
    learned = model if isinstance(model, QuantizationAwareClassifier) else None
    model = model.classifier if learned is not None else model
    serving = ExportSignatures(model, sequence_length, pair=pair)
    calibrated = calibrated_quantizations(formats, quantizations, learned=learned is not None)
    if calibrated and not calibration_texts:
        raise ValueError(
            f"{calibrated[0]} needs calibration examples: pass --calibration FILE (real examples of the task)."
        )
    static = [q for q in quantizations if q in STATIC_QUANTIZATIONS and _written(q, formats)]
    if static and serving.kind != "classifier":
        raise ValueError(
            f"{static[0]} is written for classifiers; this model's head is {serving.kind!r}. "
            f"Leave {static[0]} out of --quantizations (dynamic_int8 runs every head)."
        )
    if static_lengths is not None:
        static_lengths = check_static_lengths(static_lengths, quantizations, formats, model)
    samples = list(calibration_texts or [])[:WARMUP_EXAMPLES] or _default_samples(serving)
    with output_folder(output, overwrite) as work:
        manifest = _write_all(
            serving,
            learned,
            work,
            name,
            formats,
            quantizations,
            calibration_texts,
            samples,
            static_lengths,
            log,
        )
        if finish is not None:
            finish(work, manifest)
        write_json_atomically(manifest, os.path.join(work, MANIFEST), indent=1)
    return manifest


def _written(quantization, formats):
    """Whether `formats` write a file in `quantization`: every one in tflite/, MediaPipe's own."""
    return "tflite" in formats or "mediapipe" in formats and quantization in MEDIAPIPE_SUFFIXES


def written_quantizations(formats, quantizations):
    """The quantizations of `quantizations` that `formats` write a file in."""
    return [q for q in quantizations if _written(q, formats)]


def calibrated_quantizations(formats, quantizations, learned=False):
    """The quantizations of `quantizations` that `formats` will calibrate: the tflite/ files'
    CALIBRATED_QUANTIZATIONS and the MediaPipe int8_only file; int8_only not when the model
    `learned` its ranges (a QuantizationAwareClassifier)."""
    return [
        q
        for q in quantizations
        if q in CALIBRATED_QUANTIZATIONS and _written(q, formats) and not (learned and q == "int8_only")
    ]


def check_static_lengths(lengths, quantizations, formats, model):
    """`export_model`'s static_lengths checked (the distinct lengths, sorted): static files are
    asked for, and the model's positions cover each length."""
    if "tflite" not in formats or not set(quantizations) & set(STATIC_QUANTIZATIONS):
        raise ValueError(
            f"static_lengths {list(lengths)} are the lengths of the static files, and no static file is asked for: "
            f"add one of {', '.join(STATIC_QUANTIZATIONS)} to --quantizations (with the tflite format), or drop "
            "--static-lengths."
        )
    if not lengths:
        raise ValueError("static_lengths is empty: give at least one length, e.g. 64,128.")
    for length in lengths:
        check_sequence_length("static_lengths", length, model.backbone.max_sequence_length)
    return sorted(set(lengths))


def _default_samples(serving):
    if serving.pair:
        return [("What is BERT?", "BERT is a language model.")]
    return ["A first warm-up sentence.", "Another one, a little longer than the first."]


def _timed(log, what, fn, *args, **kwargs):
    start = time.perf_counter()
    log(f"  {what} ...")
    result = fn(*args, **kwargs)
    log(f"  {what}: {time.perf_counter() - start:.1f} s")
    return result


def _write_all(
    serving, learned, work, name, formats, quantizations, calibration_texts, samples, static_lengths, log
):
    model = serving.model
    backbone = model.backbone
    files = {}
    ids_dir = os.path.join(work, "serving", f"{name}_ids", "1")
    # The ids SavedModel is also what the .tflite files are converted from.
    _timed(
        log, "SavedModel (token ids)", serving.export_archive(text=False).write_out, ids_dir, verbose=False
    )
    x = tokenize(serving, samples)
    write_warmup_requests(ids_dir, f"{name}_ids", [{k: x[k] for k in EXPORT_ID_INPUTS}])
    if "saved_model" in formats:
        files["saved_model_ids"] = os.path.relpath(ids_dir, work)
        text_dir = os.path.join(work, "serving", name, "1")
        _timed(
            log, "SavedModel (raw text)", serving.export_archive(text=True).write_out, text_dir, verbose=False
        )
        write_warmup_requests(text_dir, name, [text_request(serving, samples)])
        files["saved_model_text"] = os.path.relpath(text_dir, work)
    cache = {}  # by length: the calibration examples tokenized at it

    def calibration(length):
        if length not in cache:
            cache[length] = id_examples(serving, list(calibration_texts)[:CALIBRATION_EXAMPLES], length)
        return cache[length]

    def static_file(quantization, length, **options):
        """The static [1, length] file: of the ranges a QuantizationAwareClassifier learned
        (int8_only), else of the float classifier, calibrated when the precision is."""
        if learned is not None and quantization == "int8_only":
            return convert_static(learned, length, quantization, **options)
        examples = calibration(length) if quantization in CALIBRATED_QUANTIZATIONS else None
        return convert_static(serving.model, length, quantization, examples, **options)

    if "tflite" in formats:
        files.update(
            _write_tflite(serving, work, name, quantizations, calibration, static_file, static_lengths, log)
        )
    if "text_tflite" in formats:
        from keras_bert_impl_export.text_in_tflite import convert_text_in

        flatbuffer = _timed(
            log,
            "TFLite text-in",
            convert_text_in,
            model,
            sequence_length=serving.sequence_length,
            pair=serving.pair and serving.kind == "classifier",
        )
        path = os.path.join(work, "text", f"{name}_text_in.tflite")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(flatbuffer)
        files["text_tflite"] = os.path.relpath(path, work)
    if "mediapipe" in formats:
        if serving.kind not in MEDIAPIPE_OUTPUTS:
            log(
                f"  no MediaPipe model for a {serving.kind}: MediaPipe Tasks' text tasks are classifiers and embedders"
            )
        elif not backbone.lowercase:
            log(
                "  no MediaPipe model: MediaPipe's BERT tokenizer always lower-cases, and this model is cased"
            )
        else:
            files.update(_write_mediapipe(serving, work, name, quantizations, static_file, log))
    if "saved_model" not in formats:
        shutil.rmtree(os.path.join(work, "serving"))
    write_text_atomically("".join(t + "\n" for t in backbone.vocabulary), os.path.join(work, "vocab.txt"))
    if serving.label_names:
        write_text_atomically(
            "".join(n + "\n" for n in serving.label_names), os.path.join(work, "labels.txt")
        )
    return {
        "name": name,
        "head": serving.kind,
        "model_class": type(model).__name__,
        "sequence_length": serving.sequence_length,
        "max_sequence_length": backbone.max_sequence_length,
        "lowercase": bool(backbone.lowercase),
        "pair": serving.pair,
        "text_inputs": list(serving.text_inputs),
        "id_inputs": list(EXPORT_ID_INPUTS),
        "id_outputs": list(serving.output_names()),
        "label_names": serving.label_names,
        "special_ids": {
            "pad": serving.preprocessor.pad_id,
            "unk": serving.preprocessor.unk_id,
            "cls": serving.preprocessor.cls_id,
            "sep": serving.preprocessor.sep_id,
        },
        "files": files,
        # A few sentences and the ids our tokenizer gives them: what a client that tokenizes
        # for itself (the web and Android demos) is checked against.
        "golden": [
            {"input": sample, "ids": [int(i) for i in np.asarray(ids)[np.asarray(mask) == 1]]}
            for sample, ids, mask in zip(samples, x["ids"], x["mask"])
        ],
    }


def _write_tflite(serving, work, name, quantizations, calibration, static_file, static_lengths, log):
    """tflite/: each precision of the ids SavedModel at a free [B, T], and each static one
    (STATIC_QUANTIZATIONS, the classifier's own [1, S] forward: `static_file(quantization, S)`)
    at S = the export's length, or once per length of `static_lengths`, the length in its
    name. `calibration(S)`: the calibration examples at length S."""
    files = {}
    ids_dir = os.path.join(work, "serving", f"{name}_ids", "1")

    def write(key, flatbuffer):
        check_builtins_only(flatbuffer)
        path = os.path.join(work, "tflite", f"{name}_{key}.tflite")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(flatbuffer)
        files[f"tflite_{key}"] = os.path.relpath(path, work)

    for quantization in quantizations:
        if quantization not in STATIC_QUANTIZATIONS:
            calibrated = quantization in CALIBRATED_QUANTIZATIONS
            write(
                quantization,
                _timed(
                    log,
                    f"TFLite {quantization}",
                    convert_saved_model,
                    ids_dir,
                    quantization,
                    calibration(serving.sequence_length) if calibrated else None,
                ),
            )
            continue
        for length in static_lengths or [serving.sequence_length]:
            # Its own static graph of the model at [1, S], not the ids SavedModel's.
            flatbuffer = _timed(
                log, f"TFLite {quantization} at [1, {length}]", static_file, quantization, length
            )
            write(quantization if static_lengths is None else f"{quantization}_{length}", flatbuffer)
    return files


# The MediaPipe files' names by precision (the float32 one plain, as apps expect one model).
# No int8_mixed MediaPipe file: MediaPipe runs text models on the CPU, where dynamic-range int8
# is smaller, faster and closer to Keras (bench/results/full_int8_denylist.json compares the
# two on the same sentences). int8_only (a classifier's): MediaPipe 0.10.21's TextClassifier
# runs it and gives LiteRT's scores; no int16x8_only one, as its runtime refuses int16
# activations ("Only float32, int8 and uint8 supported currently, got INT16", on GELU).
MEDIAPIPE_SUFFIXES = {
    "float32": "",
    "float16": "_float16",
    "dynamic_int8": "_int8",
    "int8_only": "_int8_only",
}


def _write_mediapipe(serving, work, name, quantizations, static_file, log):
    """[1, S] ids in, the one output MediaPipe Tasks read (probabilities or embeddings),
    float32, with the metadata that carries the vocabulary and the labels.
    `static_file(quantization, S, probabilities=True)`: the int8_only one."""
    from keras_bert_impl_export import tflite_metadata

    output_name = MEDIAPIPE_OUTPUTS[serving.kind]
    ids_function, signature = serving.endpoint(text=False, batch=1, length=serving.sequence_length)

    def serve(ids, mask, segment_ids):
        return {output_name: ids_function(ids, mask, segment_ids)[output_name]}

    files = {}
    backbone = serving.model.backbone
    for quantization in [q for q in quantizations if q in MEDIAPIPE_SUFFIXES]:
        suffix = MEDIAPIPE_SUFFIXES[quantization]
        if quantization in STATIC_QUANTIZATIONS:  # the integer-only graph, probabilities out
            flatbuffer = _timed(
                log,
                f"TFLite for MediaPipe, {quantization}",
                static_file,
                quantization,
                serving.sequence_length,
                probabilities=True,
            )
        else:
            flatbuffer = _timed(
                log, f"TFLite for MediaPipe, {quantization}", convert_endpoint, serve, signature, quantization
            )
        check_builtins_only(flatbuffer)
        flatbuffer = tflite_metadata.add_metadata(
            flatbuffer,
            kind=serving.kind,
            vocabulary=list(backbone.vocabulary),
            lowercase=bool(backbone.lowercase),
            label_names=serving.label_names or None,
            name=name,
            description=f"{type(serving.model).__name__} exported by kbert export ({quantization})",
            version="1",
        )
        path = os.path.join(work, "mediapipe", f"{name}{suffix}.tflite")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(flatbuffer)
        files["mediapipe" + suffix] = os.path.relpath(path, work)
    return files
