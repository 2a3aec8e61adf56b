"""What every format of one `kbert export` shares: the model, the work folder, the choices, and
the steps more than one format takes (timing, calibration, static files, writing a file)."""

import dataclasses
import os
import time

from keras_bert_impl.atomic_write import write_atomically, write_text_atomically
from keras_bert_impl.conversion.input_contract import CALIBRATED_QUANTIZATIONS
from keras_bert_impl.conversion.integer_only import convert_static
from keras_bert_impl_export.tokenized_examples import id_examples

# Examples the calibration of int8_mixed and the integer-only files runs (Model Garden's and
# TFLite's guides use 100-500).
CALIBRATION_EXAMPLES = 200


@dataclasses.dataclass(kw_only=True)
class ExportJob:
    """One export in progress; each format's `write(job)` adds its files to `files`.

    Args:
        serving: the model's `ExportSignatures` (its float classifier's, for a
            QuantizationAwareClassifier).
        learned: the QuantizationAwareClassifier whose int8_only files take the ranges it
            learned, or None.
        work: the folder being built (renamed to OUTPUT at the end).
        name: the model name in TF Serving's layout and the file names.
        quantizations: the .tflite precisions asked for.
        calibration_texts: real examples of the task (texts or (a, b) pairs), or None.
        samples: the few examples of the warm-up requests and the golden ids.
        static_lengths: None (each static file at the export's length), or its lengths.
        log: progress lines go here.
    """

    serving: object
    learned: object
    work: str
    name: str
    quantizations: tuple
    calibration_texts: object
    samples: list
    static_lengths: object
    log: object
    # key -> path relative to `work`: export.json's "files".
    files: dict = dataclasses.field(default_factory=dict)
    _calibration: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def ids_dir(self):
        """The ids SavedModel's version folder: what the .tflite files are converted from."""
        return os.path.join(self.work, "serving", f"{self.name}_ids", "1")

    def timed(self, what, fn, *args, **kwargs):
        """`fn(*args, **kwargs)`, with a progress line before and its seconds after."""
        start = time.perf_counter()
        self.log(f"  {what} ...")
        result = fn(*args, **kwargs)
        self.log(f"  {what}: {time.perf_counter() - start:.1f} s")
        return result

    def calibration(self, length):
        """The calibration examples tokenized at `length` (once per length)."""
        if length not in self._calibration:
            texts = list(self.calibration_texts)[:CALIBRATION_EXAMPLES]
            self._calibration[length] = id_examples(self.serving, texts, length)
        return self._calibration[length]

    def static_file(self, quantization, length, **options):
        """The static [1, length] file: of the ranges a QuantizationAwareClassifier learned
        (int8_only), else of the float classifier, calibrated when the precision is."""
        if self.learned is not None and quantization == "int8_only":
            return convert_static(self.learned, length, quantization, **options)
        examples = self.calibration(length) if quantization in CALIBRATED_QUANTIZATIONS else None
        return convert_static(self.serving.model, length, quantization, examples, **options)

    def write_file(self, key, relative_path, data):
        """Writes the bytes `data` at `work/relative_path` (atomically, folders made) and
        records it as `files[key]`."""

        def write(tmp):
            with open(tmp, "wb") as f:
                f.write(data)

        path = os.path.join(self.work, relative_path)
        write_atomically(path, write, suffix=os.path.splitext(path)[1])
        self.files[key] = relative_path

    def write_text(self, relative_path, lines):
        """`lines`, one per line, as UTF-8 text at `work/relative_path`, written atomically."""
        write_text_atomically("".join(line + "\n" for line in lines), os.path.join(self.work, relative_path))
