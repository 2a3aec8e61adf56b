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


class _BertPreprocessorOnLoad:
    """Stands in for BertPreprocessor in Keras' registry until the real class is imported
    (which replaces it there): `keras.saving.load_model` of a .keras file with the in-graph
    tokenizer in it imports the real layer on TensorFlow, and elsewhere says that the file
    loads on TensorFlow only, where Keras said only "Could not locate class
    'BertPreprocessor'" (on TensorFlow too, until something had imported the module)."""

    @classmethod
    def from_config(cls, config):
        from keras_bert_impl.backend_support import TensorFlowOnlyError

        try:
            module = importlib.import_module(_LAZY["BertPreprocessor"])
        except TensorFlowOnlyError as error:
            raise TensorFlowOnlyError(
                f"The model being loaded holds a BertPreprocessor layer ({config.get('name')!r}), the "
                f"in-graph WordPiece tokenizer, so it loads on TensorFlow only. {error} To run it on this "
                "backend, save the model it wraps without the preprocessor in a TensorFlow process (e.g. "
                "the BertClassifier inside it, with model.save) and load that here."
            ) from None
        return module.BertPreprocessor.from_config(config)

    def get_config(self):  # what Keras' registry asks of a class
        raise NotImplementedError


def _register_preprocessor_on_load():
    import keras

    if "keras_bert_impl>BertPreprocessor" not in keras.saving.get_custom_objects():
        keras.saving.register_keras_serializable(package="keras_bert_impl", name="BertPreprocessor")(
            _BertPreprocessorOnLoad
        )


_register_preprocessor_on_load()
