"""Contextual vectors of one word across sentences: the same word gets a different vector in
each context, and the vectors of one sense sit together (the word-sense picture).

Shape legend: B batch, T tokens, H hidden size.
"""

import numpy as np

from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert_impl.tokenization.vocabulary import is_continuation
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH, check_int, check_positive_int


def _occurrences(ids, word_ids, vocabulary):
    """Start positions of `word_ids` in `ids` as a whole word (not inside a longer one)."""
    n = len(word_ids)
    starts = []
    for i in range(len(ids) - n + 1):
        if ids[i : i + n] == word_ids and (i + n == len(ids) or not is_continuation(vocabulary[ids[i + n]])):
            starts.append(i)
    return starts


def word_vectors(backbone, word, sentences, layer=-1, sequence_length=DEFAULT_SEQUENCE_LENGTH, batch_size=32):
    """The vector of every occurrence of `word` in `sentences` (the mean over its wordpieces
    at `layer`: 0 = embeddings, -1 = last).

    Returns:
        (vectors float32 [M, H], rows [M]: the sentence index of each occurrence).

    Raises:
        ValueError: a word that is not one word, or that occurs in none of the sentences.
    """
    if not isinstance(backbone, BertBackbone) or backbone.vocabulary is None:
        raise ValueError("word_vectors needs a BertBackbone that carries its vocabulary.")
    if not isinstance(word, str) or len(word.split()) != 1:
        raise ValueError(f"word must be a single word (no spaces). Received: {word!r}")
    check_int("layer", layer)
    check_positive_int("batch_size", batch_size)
    num_layers = backbone.num_layers
    if not -(num_layers + 1) <= layer <= num_layers:
        raise ValueError(
            f"layer must be in [{-(num_layers + 1)}, {num_layers}] for a {num_layers}-layer model. "
            f"Received: layer={layer}"
        )
    vocabulary = backbone.vocabulary
    preprocessor = BertPreprocessor(vocabulary, lowercase=backbone.lowercase, sequence_length=sequence_length)
    word_ids = preprocessor.tokenize_lists([word])[0]
    if not word_ids:
        raise ValueError(f"word {word!r} has no wordpieces in the vocabulary.")
    config = backbone.get_config()
    config.pop("name", None)
    config.update(return_hidden_states=True, return_attention_scores=False)
    model = BertBackbone.from_config(config)
    model.set_weights(backbone.get_weights())
    vectors, rows = [], []
    for start in range(0, len(sentences), batch_size):
        chunk = list(sentences[start : start + batch_size])
        x = preprocessor(chunk)
        token_ids = np.asarray(x["token_ids"])
        found = [
            (b, s)
            for b in range(len(chunk))
            for s in _occurrences(token_ids[b].tolist(), word_ids, vocabulary)
        ]
        if not found:
            continue
        hidden = np.asarray(model(x, training=False)["hidden_states"][:, layer], np.float32)  # [B, T, H]
        for b, s in found:
            vectors.append(hidden[b, s : s + len(word_ids)].mean(axis=0))
            rows.append(start + b)
    if not vectors:
        raise ValueError(
            f"word {word!r} occurs in none of the {len(sentences)} sentences (as a whole word, within the "
            "sequence length)."
        )
    return np.stack(vectors), np.asarray(rows)
