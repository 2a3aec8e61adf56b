"""keras_bert_impl: BERT built from its parts as Keras 3 layers."""

import os

# Keras 3 picks its backend at import time; this library's TensorFlow-side
# pieces (tokenization, export) need the TensorFlow backend.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# TensorFlow's C++ INFO lines (CUDA probing, oneDNN notes, end-of-sequence
# notices from tf.data) drown the progress bars; warnings and errors still show.
# On a machine without NVIDIA's driver the CUDA build of TensorFlow also logs
# "failed call to cuInit" as an error on every start, which can only mean "no GPU":
# there the default hides C++ errors too (Python exceptions still carry every
# failure). Only a default: a TF_CPP_MIN_LOG_LEVEL the user set wins. It must be
# set before TensorFlow is first imported, which is why it is here and not in cli.py.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2" if os.path.exists("/proc/driver/nvidia") else "3")

from keras_bert_impl import layers  # noqa: E402
from keras_bert_impl.models import (  # noqa: E402
    BERT_PRESETS,
    BertBackbone,
    BertClassifier,
    BertEmbedder,
    BertPretrainer,
    BertSpanLabeler,
    BertTask,
    BertTokenClassifier,
    DistillationLoss,
    Distiller,
    MaskedLMAccuracy,
    MaskedSparseCrossentropy,
)

__version__ = "0.1.0"
