"""--formats saved_model: serving/NAME/1 (raw text in) and serving/NAME_ids/1 (token ids in),
TF Serving's layout, each with its warm-up requests."""

import os

from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS
from keras_bert_impl_export.tokenized_examples import text_request, tokenize
from keras_bert_impl_export.warmup import write_warmup_requests

FORMAT = "saved_model"


def write_ids(job):
    """The ids SavedModel, written by every export of saved_model or tflite: the .tflite files
    are converted from it (the exporter removes serving/ at the end unless saved_model is asked
    for). Returns the samples tokenized: {ids, mask, segment_ids} [N, S]."""
    job.timed(
        "SavedModel (token ids)", job.serving.export_archive(text=False).write_out, job.ids_dir, verbose=False
    )
    x = tokenize(job.serving, job.samples)
    write_warmup_requests(job.ids_dir, f"{job.name}_ids", [{k: x[k] for k in EXPORT_ID_INPUTS}])
    return x


def write(job):
    """Records the ids SavedModel (`write_ids`) and writes the raw-text one beside it."""
    job.files["saved_model_ids"] = os.path.relpath(job.ids_dir, job.work)
    text_dir = os.path.join(job.work, "serving", job.name, "1")
    job.timed(
        "SavedModel (raw text)", job.serving.export_archive(text=True).write_out, text_dir, verbose=False
    )
    write_warmup_requests(text_dir, job.name, [text_request(job.serving, job.samples)])
    job.files["saved_model_text"] = os.path.relpath(text_dir, job.work)
