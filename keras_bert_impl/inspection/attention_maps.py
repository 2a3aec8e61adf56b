"""The attention probabilities of every layer and head for one text or text pair, with the
wordpieces they attend between, trimmed to the real (unpadded) tokens.

Shape legend: L layers, N heads, T real tokens ([CLS], pieces, [SEP]s).
"""

import numpy as np

from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH, check_int


class AttentionMaps:
    """Attention probabilities [L, N, T, T] (row = the attending token, column = the token
    attended to; each row sums to 1) and the T wordpieces.

    Args:
        tokens: T wordpiece strings.
        probabilities: float [L, N, T, T].
        segment_ids: T ints (0 for the first text, 1 for the second).
        truncated: whether the text was cut to fit the sequence length.

    Example:
    >>> from keras_bert_impl.tokenization import read_vocabulary
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny")
    >>> backbone.set_vocabulary(read_vocabulary("data/minilm/vocab.txt"), lowercase=True)
    >>> maps = AttentionMaps.compute(backbone, "The animal was tired")
    >>> maps.tokens, maps.probabilities.shape, maps.probabilities.sum(-1).round(4).min()
    (['[CLS]', 'the', 'animal', 'was', 'tired', '[SEP]'], (2, 2, 6, 6), np.float32(1.0))
    """

    def __init__(self, tokens, probabilities, segment_ids, truncated=False):
        probabilities = np.asarray(probabilities, np.float32)
        if probabilities.ndim != 4 or probabilities.shape[2:] != (len(tokens), len(tokens)):
            raise ValueError(
                f"probabilities must be [layers, heads, {len(tokens)}, {len(tokens)}] for {len(tokens)} "
                f"tokens. Received shape {probabilities.shape}."
            )
        self.tokens = list(tokens)
        self.probabilities = probabilities
        self.segment_ids = [int(s) for s in segment_ids]
        self.truncated = bool(truncated)

    @property
    def num_layers(self):
        return self.probabilities.shape[0]

    @property
    def num_heads(self):
        return self.probabilities.shape[1]

    def check_layer(self, layer, name="layer"):
        """A 0-based layer index (negative counts from the end), checked against the model."""
        n = self.num_layers
        return _index_in(name, layer, n, f" (or -1 for the last) for this {n}-layer model")

    def check_head(self, head, name="head"):
        return _index_in(name, head, self.num_heads, f" for this model's {self.num_heads} heads")

    @classmethod
    def compute(cls, backbone, text, text_b=None, sequence_length=DEFAULT_SEQUENCE_LENGTH):
        """Runs `backbone` (a `BertBackbone` with its vocabulary) on one text or pair."""
        if not isinstance(backbone, BertBackbone):
            raise ValueError(f"AttentionMaps needs a BertBackbone. Received: {type(backbone).__name__}")
        if backbone.vocabulary is None:
            raise ValueError(
                "The backbone carries no vocabulary: load one written by `kbert convert` or `kbert finetune`."
            )
        for name, value in (("text", text), ("text_b", text_b)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a string. Received: {type(value).__name__}")
        check_int("sequence_length", sequence_length, minimum=3 if text_b is None else 4)
        sequence_length = min(sequence_length, backbone.max_sequence_length)
        preprocessor = BertPreprocessor(
            backbone.vocabulary, lowercase=backbone.lowercase, sequence_length=sequence_length
        )
        segments = [text] if text_b is None else [text, text_b]
        full = sum(len(pieces) for pieces in preprocessor.tokenize_lists(segments)) + len(segments) + 1
        x = preprocessor(text) if text_b is None else preprocessor(([text], [text_b]))
        used = int(np.asarray(x["padding_mask"]).sum())
        x = {key: np.asarray(value)[:, :used] for key, value in x.items()}  # each [1, T]
        config = backbone.get_config()
        config.pop("name", None)
        config.update(return_attention_scores=True, return_hidden_states=False)
        model = BertBackbone.from_config(config)
        model.set_weights(backbone.get_weights())
        probabilities = np.asarray(model(x, training=False)["attention_probs"], np.float32)[0]  # [L, N, T, T]
        tokens = [backbone.vocabulary[i] for i in x["token_ids"][0]]
        return cls(tokens, probabilities, x["segment_ids"][0], truncated=full > used)

    def to_dict(self):
        """Plain data (for JSON): tokens, segment_ids, truncated and probabilities [L][N][T][T] rounded
        to 4 digits."""
        return {
            "tokens": self.tokens,
            "segment_ids": self.segment_ids,
            "truncated": self.truncated,
            "probabilities": np.round(self.probabilities, 4).tolist(),
        }


def _index_in(name, index, count, which):
    """`index` in [0, count) (a negative one counts from the end); the error says `which` count."""
    check_int(name, index)
    if not -count <= index < count:
        raise ValueError(f"{name} must be in [0, {count - 1}]{which}. Received: {name}={index}")
    return index % count
