"""--formats mediapipe: mediapipe/NAME*.tflite, [1, S] ids in, the one output MediaPipe Tasks
read (probabilities or embeddings), with the metadata that carries the vocabulary and the
labels: NAME.tflite float32, NAME_float16, NAME_int8 (dynamic range), NAME_int8_only."""

import contextlib
import os

from keras_bert_impl.conversion.input_contract import STATIC_QUANTIZATIONS
from keras_bert_impl.tensor_names import MEDIAPIPE_OUTPUTS
from keras_bert_impl.conversion.tflite_converter import (
    check_builtins_only,
    endpoint_saved_model,
    saved_model_converter,
)
from keras_bert_impl_export.tflite_metadata import add_metadata

FORMAT = "mediapipe"

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


def write(job):
    """The files, or a progress line saying why a model has none (the other formats go on)."""
    serving = job.serving
    if serving.kind not in MEDIAPIPE_OUTPUTS:
        job.log(
            f"  no MediaPipe model for a {serving.kind}: MediaPipe Tasks' text tasks are classifiers "
            "and embedders"
        )
    elif not serving.model.backbone.lowercase:
        job.log(
            "  no MediaPipe model: MediaPipe's BERT tokenizer always lower-cases, and this model is cased"
        )
    else:
        quantizations = [q for q in job.quantizations if q in MEDIAPIPE_SUFFIXES]
        with contextlib.ExitStack() as stack:
            convert = None
            if set(quantizations) - set(STATIC_QUANTIZATIONS):
                # The endpoint traced and written once, its SavedModel loaded once, for each precision.
                saved_model = job.timed(
                    "SavedModel for MediaPipe", stack.enter_context, endpoint_saved_model(*_endpoint(serving))
                )
                convert = saved_model_converter(saved_model)
            for quantization in quantizations:
                _write(job, quantization, _convert(job, quantization, convert))


def _endpoint(serving):
    """(function, signature): the [1, S] ids endpoint cut to its one MediaPipe output."""
    output_name = MEDIAPIPE_OUTPUTS[serving.kind]
    ids_function, signature = serving.endpoint(text=False, batch=1, length=serving.sequence_length)

    def serve(ids, mask, segment_ids):
        return {output_name: ids_function(ids, mask, segment_ids)[output_name]}

    return serve, signature


def _convert(job, quantization, convert):
    """The file's flatbuffer without metadata: the integer-only graph with probabilities out
    (`job.static_file`), or the endpoint's SavedModel converted (`convert`)."""
    what = f"TFLite for MediaPipe, {quantization}"
    if quantization in STATIC_QUANTIZATIONS:
        return job.timed(what, job.static_file, quantization, job.serving.sequence_length, probabilities=True)
    return job.timed(what, convert, quantization)


def _write(job, quantization, flatbuffer):
    check_builtins_only(flatbuffer)
    serving = job.serving
    backbone = serving.model.backbone
    flatbuffer = add_metadata(
        flatbuffer,
        kind=serving.kind,
        vocabulary=list(backbone.vocabulary),
        lowercase=bool(backbone.lowercase),
        label_names=serving.label_names or None,
        name=job.name,
        description=f"{type(serving.model).__name__} exported by kbert export ({quantization})",
        version="1",
    )
    suffix = MEDIAPIPE_SUFFIXES[quantization]
    job.write_file("mediapipe" + suffix, os.path.join("mediapipe", f"{job.name}{suffix}.tflite"), flatbuffer)
