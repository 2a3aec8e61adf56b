"""keras_bert_impl: BERT built from its parts as Keras 3 layers."""

import os

# Keras 3 picks its backend at import time; this library's TensorFlow-side
# pieces (tokenization, export) need the TensorFlow backend.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_bert_impl import layers  # noqa: E402
from keras_bert_impl.models import (  # noqa: E402
    BERT_PRESETS,
    BertBackbone,
    BertClassifier,
    BertEmbedder,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenClassifier,
)

__version__ = "0.1.0"
