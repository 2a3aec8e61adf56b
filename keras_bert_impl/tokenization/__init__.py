"""Tokenization: WordPiece vocabularies, BERT's normalisation, the in-graph preprocessor.

`vocabulary` and `bert_normalizer` are plain Python; `BertPreprocessor` and
`VocabularyBuilder` need TensorFlow and tensorflow-text. The package imports
them on first use, so model code can read a vocabulary (`.keras` assets)
without loading tensorflow-text.
"""

import importlib

from keras_bert_impl.tokenization.vocabulary import (
    SPECIAL_TOKENS,
    SUFFIX_INDICATOR,
    VOCAB_ASSET,
    duplicate_tokens,
    is_continuation,
    load_vocabulary,
    piece_text,
    read_vocabulary,
    special_token_ids,
    vocabulary_is_uncased,
    write_vocabulary,
)

_LAZY = {
    "BertPreprocessor": "keras_bert_impl.tokenization.bert_preprocessor",
    "VocabularyBuilder": "keras_bert_impl.tokenization.vocabulary_builder",
}

__all__ = [
    "BertPreprocessor",
    "SPECIAL_TOKENS",
    "SUFFIX_INDICATOR",
    "VOCAB_ASSET",
    "VocabularyBuilder",
    "duplicate_tokens",
    "is_continuation",
    "load_vocabulary",
    "piece_text",
    "read_vocabulary",
    "special_token_ids",
    "vocabulary_is_uncased",
    "write_vocabulary",
]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
