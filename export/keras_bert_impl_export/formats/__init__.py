"""One unit per `kbert export --formats` entry that writes into the export folder, each a
module with FORMAT (its --formats name) and `write(job)` (an `ExportJob`: the unit writes its
files under `job.work` and records them in `job.files`). WRITERS runs them in this order,
which is export.json's order of files and the order of the progress lines.

The hub formats (huggingface, sentence_transformers) make the whole --output folder
instead: `keras_bert_impl_export.huggingface`."""

from keras_bert_impl_export.formats import mediapipe_files, saved_model_files, text_in_file, tflite_files

# --formats name -> write(job), in the order they run.
WRITERS = {
    unit.FORMAT: unit.write for unit in (saved_model_files, tflite_files, text_in_file, mediapipe_files)
}
