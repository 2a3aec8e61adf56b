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

Each format is one unit of `keras_bert_impl_export.formats` (`write(job)`, an `ExportJob`);
this module checks the arguments, runs the units and writes the manifest.

Everything is built in a sibling folder `OUTPUT.partial-PID` and renamed into place at the
end, so a killed export leaves no half-written OUTPUT (the next run deletes the leftover).
"""

import contextlib
import glob
import os
import shutil

import numpy as np

from keras_bert_impl.atomic_write import replace_folder, write_json_atomically
from keras_bert_impl.conversion.input_contract import (
    CALIBRATED_QUANTIZATIONS,
    EXPORT_FORMATS,
    QUANTIZATIONS,
    STATIC_QUANTIZATIONS,
    check_quantization,
)
from keras_bert_impl.models import QuantizationAwareClassifier
from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS
from keras_bert_impl.validation import check_choice, check_sequence_length
from keras_bert_impl_export.export_job import ExportJob
from keras_bert_impl_export.export_signatures import ExportSignatures
from keras_bert_impl_export.formats import WRITERS, saved_model_files
from keras_bert_impl_export.formats.mediapipe_files import MEDIAPIPE_SUFFIXES

# Part of the exporter's API too: bench/ scripts and tests tokenize as the export does through them.
from keras_bert_impl_export.tokenized_examples import id_examples as id_examples
from keras_bert_impl_export.tokenized_examples import tokenize as tokenize

MANIFEST = "export.json"
WARMUP_EXAMPLES = 4


class ExportExistsError(FileExistsError):
    pass


def prepare_output(output, overwrite):
    """Checks OUTPUT and clears the leftovers of killed exports; returns the work folder."""
    output = os.path.abspath(output)
    if os.path.exists(output) and not (os.path.isdir(output) and not os.listdir(output)):
        if not overwrite:
            holds = " and holds an export" if os.path.exists(os.path.join(output, MANIFEST)) else ""
            raise ExportExistsError(
                f"--output {output} already exists{holds}. "
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
            f"{calibrated[0]} needs calibration examples: pass --calibration FILE "
            "(real examples of the task)."
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
        job = ExportJob(
            serving=serving,
            learned=learned,
            work=work,
            name=name,
            quantizations=quantizations,
            calibration_texts=calibration_texts,
            samples=samples,
            static_lengths=static_lengths,
            log=log,
        )
        manifest = _write_all(job, formats)
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
            f"static_lengths {list(lengths)} are the lengths of the static files, and no static file is "
            f"asked for: add one of {', '.join(STATIC_QUANTIZATIONS)} to --quantizations (with the tflite "
            "format), or drop --static-lengths."
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


def _write_all(job, formats):
    """Every file of `formats` into `job.work`; returns the manifest."""
    if "saved_model" in formats or "tflite" in formats:
        x = saved_model_files.write_ids(job)
    else:  # nothing is converted from the ids SavedModel (MediaPipe and text-in trace their own)
        x = tokenize(job.serving, job.samples)
    for fmt, write in WRITERS.items():
        if fmt in formats:
            write(job)
    if "saved_model" not in formats and os.path.isdir(os.path.join(job.work, "serving")):
        shutil.rmtree(os.path.join(job.work, "serving"))
    backbone = job.serving.model.backbone
    job.write_text("vocab.txt", backbone.vocabulary)
    if job.serving.label_names:
        job.write_text("labels.txt", job.serving.label_names)
    return _manifest(job, x)


def _manifest(job, x):
    """export.json: what was written, inputs and outputs, casing, sequence length; `x`: the
    samples tokenized."""
    serving = job.serving
    backbone = serving.model.backbone
    return {
        "name": job.name,
        "head": serving.kind,
        "model_class": type(serving.model).__name__,
        "sequence_length": serving.sequence_length,
        "max_sequence_length": backbone.max_sequence_length,
        "lowercase": bool(backbone.lowercase),
        "pair": serving.pair,
        "multi_label": bool(getattr(serving.model, "multi_label", False)),
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
        "files": job.files,
        # A few sentences and the ids our tokenizer gives them: what a client that tokenizes
        # for itself (the web and Android demos) is checked against.
        "golden": [
            {"input": sample, "ids": [int(i) for i in np.asarray(ids)[np.asarray(mask) == 1]]}
            for sample, ids, mask in zip(job.samples, x["ids"], x["mask"])
        ],
    }
