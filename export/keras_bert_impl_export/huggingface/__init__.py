"""A model of this library as a Hugging Face `transformers` folder (`from_pretrained(folder)`):
config.json, model.safetensors, the tokenizer files and a model card. The weight names are the
Hugging Face importer's own rules read backwards (keras_bert_impl.checkpoints), so importing
an export gives the same weights back. A sentence embedder also as a sentence-transformers
folder (`export_sentence_transformers`: the same folder plus its pooling modules), and a LoRA
model as a PEFT adapter over its base (`export_peft_adapter`)."""

from keras_bert_impl_export.huggingface.export_huggingface import export_huggingface
from keras_bert_impl_export.huggingface.export_peft_adapter import export_peft_adapter
from keras_bert_impl_export.huggingface.export_sentence_transformers import export_sentence_transformers
from keras_bert_impl_export.huggingface.not_expressible_error import NotExpressibleError
from keras_bert_impl_export.huggingface.transformers_model import TransformersModel, transformers_model

__all__ = [
    "NotExpressibleError",
    "TransformersModel",
    "export_huggingface",
    "export_peft_adapter",
    "export_sentence_transformers",
    "transformers_model",
]
