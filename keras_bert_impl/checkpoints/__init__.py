"""Checkpoint importers: Google's TF1 release, Hugging Face safetensors, Model Garden."""

from keras_bert_impl.checkpoints.huggingface import HIDDEN_ACT as HUGGINGFACE_HIDDEN_ACT, huggingface_tensors
from keras_bert_impl.checkpoints.import_report import CheckpointMismatchError, ImportReport

FORMATS = ("google", "huggingface", "model-garden")

__all__ = [
    "FORMATS",
    "HUGGINGFACE_HIDDEN_ACT",
    "CheckpointMismatchError",
    "ImportReport",
    "convert_checkpoint",
    "huggingface_tensors",
]


def convert_checkpoint(src, format, with_heads=None, allow_pickle=False):
    """Builds a keras_bert_impl model from a checkpoint folder.

    Args:
        src: the checkpoint folder.
        format: "google", "huggingface" or "model-garden".
        with_heads: None loads MLM/NSP heads when present (giving a BertPretrainer);
            True demands them (a ValueError when the checkpoint has none); False always
            returns the BertBackbone.
        allow_pickle: Hugging Face only: read pytorch_model.bin (runs pickle).
    Returns:
        (model, ImportReport)
    """
    if with_heads not in (None, True, False):
        raise ValueError(f"with_heads must be None, True or False. Received: with_heads={with_heads!r}")
    if format == "google":
        from keras_bert_impl.checkpoints.google_tf1 import load_google_checkpoint

        return load_google_checkpoint(src, with_heads=with_heads)
    if format == "huggingface":
        from keras_bert_impl.checkpoints.huggingface import load_huggingface_checkpoint

        return load_huggingface_checkpoint(src, with_heads=with_heads, allow_pickle=allow_pickle)
    if format == "model-garden":
        from keras_bert_impl.checkpoints.model_garden import load_model_garden_checkpoint

        if with_heads:
            raise ValueError(
                "with_heads=True, but a Model Garden encoder checkpoint has no MLM or NSP head: pass "
                "with_heads=None."
            )

        return load_model_garden_checkpoint(src)
    raise ValueError(f"format must be one of {list(FORMATS)}. Received: format={format!r}")
