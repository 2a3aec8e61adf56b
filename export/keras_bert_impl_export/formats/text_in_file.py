"""--formats text_tflite: text/NAME_text_in.tflite, strings in, tensorflow-text's tokenizer
inside (custom ops)."""

import os

from keras_bert_impl_export.text_in_tflite import convert_text_in

FORMAT = "text_tflite"


def write(job):
    serving = job.serving
    flatbuffer = job.timed(
        "TFLite text-in",
        convert_text_in,
        serving.model,
        sequence_length=serving.sequence_length,
        pair=serving.pair and serving.kind == "classifier",
    )
    job.write_file("text_tflite", os.path.join("text", f"{job.name}_text_in.tflite"), flatbuffer)
