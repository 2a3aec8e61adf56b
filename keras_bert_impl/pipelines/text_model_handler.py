"""Beam's ModelHandler around the library's text models (imports Beam)."""

from apache_beam.ml.inference.base import ModelHandler, PredictionResult


class TextModelHandler(ModelHandler):
    """RunInference's handler for a model `load()` builds on the worker (a `TextPredictor` or a
    `SentenceEncoder` behind `infer(texts)`): Beam batches the texts, the model sorts each batch
    by length and pads it to its longest row, as in the one-process commands."""

    def __init__(self, load, max_batch_size=1024):
        super().__init__()
        self._load = load
        self._max_batch_size = max_batch_size

    def load_model(self):
        return self._load()

    def run_inference(self, batch, model, inference_args=None):
        outputs = model.infer(list(batch))
        return [PredictionResult(text, output) for text, output in zip(batch, outputs)]

    def batch_elements_kwargs(self):
        # Full batches: Beam's default estimator starts every bundle at one text and doubles, so a
        # worker ran dozens of small, badly padded batches (each sorted and padded by itself) where
        # the one-process command sorts thousands of texts at once. A bundle's last batch is smaller.
        return {"min_batch_size": self._max_batch_size, "max_batch_size": self._max_batch_size}

    def share_model_across_processes(self):
        return False
