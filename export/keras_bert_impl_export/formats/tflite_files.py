"""--formats tflite: tflite/NAME_QUANT.tflite, builtin ops only. Each precision of the ids
SavedModel at a free [B, T], and each static one (STATIC_QUANTIZATIONS, the classifier's own
[1, S] forward) at S = the export's length, or once per length of --static-lengths, the length
in its name."""

import os

from keras_bert_impl.conversion.input_contract import CALIBRATED_QUANTIZATIONS, STATIC_QUANTIZATIONS
from keras_bert_impl.conversion.tflite_converter import check_builtins_only, saved_model_converter

FORMAT = "tflite"


def write(job):
    convert = None  # the ids SavedModel loaded once, for every precision of it
    for quantization in job.quantizations:
        if quantization in STATIC_QUANTIZATIONS:
            _write_static(job, quantization)
            continue
        calibrated = quantization in CALIBRATED_QUANTIZATIONS
        convert = convert or saved_model_converter(job.ids_dir)
        flatbuffer = job.timed(
            f"TFLite {quantization}",
            convert,
            quantization,
            job.calibration(job.serving.sequence_length) if calibrated else None,
        )
        _write(job, quantization, flatbuffer)


def _write_static(job, quantization):
    for length in job.static_lengths or [job.serving.sequence_length]:
        # Its own static graph of the model at [1, S], not the ids SavedModel's.
        flatbuffer = job.timed(
            f"TFLite {quantization} at [1, {length}]", job.static_file, quantization, length
        )
        _write(job, quantization if job.static_lengths is None else f"{quantization}_{length}", flatbuffer)


def _write(job, key, flatbuffer):
    check_builtins_only(flatbuffer)
    job.write_file(f"tflite_{key}", os.path.join("tflite", f"{job.name}_{key}.tflite"), flatbuffer)
