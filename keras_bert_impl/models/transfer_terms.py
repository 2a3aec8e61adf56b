"""Intermediate-layer transfer (TinyBERT, Jiao et al. 2020), the `Distiller`'s helpers: the
layer map, the hidden-state and embedding MSE through a learned projection, and the per-head
attention KL, each averaged over the real tokens of the global batch. Every refusal is a
`DistillationArgumentError` naming the argument.

Shape legend: B batch, T tokens, H width (Hs student, Ht teacher), K mapped layers, N heads.
"""

import numbers

import keras
from keras import ops

from keras_bert_impl.models.distillation_argument_error import DistillationArgumentError
from keras_bert_impl.models.masked_sparse_crossentropy import sum_over_replicas

# A floor under the attention probabilities before their log: a real key whose probability
# underflowed to 0 in float32 gets log(1e-30) = -69, finite, instead of -inf (0 * -inf = NaN).
_TINY = 1e-30


def resolve_layer_map(layer_map, teacher_layers, student_layers):
    """`layer_map` as a list of teacher hidden-state indices, one per student layer, or None.
    "uniform" is TinyBERT's m(i) = (i + 1) * teacher_layers // student_layers.

    Example:
    >>> resolve_layer_map("uniform", 6, 2)
    [3, 6]
    """
    if layer_map is None:
        return None
    if isinstance(layer_map, str):
        if layer_map != "uniform":
            raise DistillationArgumentError(
                "layer_map",
                f"layer_map must be None, 'uniform' or a list of teacher layers. Received: "
                f"layer_map={layer_map!r}",
            )
        mapped = [(i + 1) * teacher_layers // student_layers for i in range(student_layers)]
        if mapped[0] < 1:
            raise DistillationArgumentError(
                "layer_map",
                f"layer_map='uniform' needs a student no deeper than the teacher. Received: "
                f"{student_layers} student layers, {teacher_layers} teacher layers.",
            )
        return mapped
    try:
        mapped = list(layer_map)
    except TypeError:
        raise DistillationArgumentError(
            "layer_map",
            f"layer_map must be None, 'uniform' or a list of teacher layers. Received: "
            f"layer_map={layer_map!r}",
        ) from None
    if len(mapped) != student_layers:
        raise DistillationArgumentError(
            "layer_map",
            f"layer_map must give one teacher layer per student layer ({student_layers}). Received "
            f"{len(mapped)}: layer_map={mapped!r}",
        )
    for i, value in enumerate(mapped):
        if (
            not isinstance(value, numbers.Integral)
            or isinstance(value, bool)
            or not 1 <= value <= teacher_layers
        ):
            raise DistillationArgumentError(
                "layer_map",
                f"layer_map[{i}] must be a teacher layer in [1, {teacher_layers}] (hidden state 0, the embedding "
                f"output, is matched by embedding_weight). Received: layer_map[{i}]={value!r} in "
                f"layer_map={mapped!r}",
            )
    return [int(value) for value in mapped]


def check_transfer(attention_weight, teacher, student):
    """Per-head attention KL needs equal head counts (`teacher`, `student`: backbones). The
    rest of the layer map's agreement with the weights is checked before the models are
    (models/distillation_settings.py)."""
    if attention_weight > 0 and teacher.num_heads != student.num_heads:
        raise DistillationArgumentError(
            "attention_weight",
            f"attention_weight={attention_weight} compares attention head by head, but the teacher has "
            f"{teacher.num_heads} heads and the student {student.num_heads}. Pass attention_weight=0 (MiniLM's "
            "head-count-free transfer of the last layer's value relations is not available here), or a student "
            f"with {teacher.num_heads} heads.",
        )


def wanted_features(hidden_weight, attention_weight, embedding_weight):
    """Which intermediate tensors the terms with a weight > 0 read."""
    return {
        "embedding_output": embedding_weight > 0,
        "hidden_states": hidden_weight > 0,
        "attention_probs": attention_weight > 0,
    }


def projection(name, student_width, teacher_width):
    """TinyBERT's W: a student state [.., Hs] -> [.., Ht], float32 like the teacher's states
    it is compared with (under mixed precision too)."""
    layer = keras.layers.Dense(teacher_width, use_bias=False, dtype="float32", name=name)
    layer.build((None, None, student_width))
    return layer


def select_features(outputs, wanted, layers):
    """From `BertBackbone.layer_outputs`' dict, the wanted tensors: `embedding_output`
    [B, T, H], `hidden_states` [B, K, T, H] of `layers` (0-based transformer layers: their
    outputs), `attention_probs` [B, K, N, T, T] of the same layers."""
    hidden = outputs["hidden_states"]
    features = {}
    if wanted["embedding_output"]:
        features["embedding_output"] = hidden[0]
    if wanted["hidden_states"]:
        features["hidden_states"] = ops.stack([hidden[i + 1] for i in layers], axis=1)
    if wanted["attention_probs"]:
        features["attention_probs"] = ops.stack([outputs["attention_probs"][i] for i in layers], axis=1)
    return features


def real_tokens(padding_mask):
    """The padding mask [B, T] as float32 and the count of real tokens in the global batch,
    the denominator of every intermediate term: each is a mean over the real tokens of the
    global batch. Under a tf.distribute strategy a replica divides its sum by the token
    count summed over every replica, so the replicas' values add up to the one-device
    value (MaskedSparseCrossentropy's rule) whatever their share of padding."""
    mask = ops.cast(padding_mask, "float32")  # [B, T]
    return mask, sum_over_replicas(ops.sum(mask))


def masked_mse(student, teacher, mask, tokens):
    """Squared error of [B, K, T, H] states averaged over the width, the K layers and the
    real tokens (mask [B, T]; `tokens` their count in the global batch)."""
    error = ops.mean(
        ops.square(ops.cast(student, "float32") - ops.cast(teacher, "float32")), axis=-1
    )  # [B, K, T]
    layers = ops.cast(ops.shape(error)[1], "float32")
    return ops.divide_no_nan(ops.sum(error * ops.expand_dims(mask, 1)), tokens * layers)


def masked_attention_kl(teacher, student, mask, tokens):
    """KL(teacher || student) over the keys of [B, K, N, T, T] attention probabilities,
    averaged over the K layers, the N heads and the real query tokens; padded keys (mask
    [B, T]) left out."""
    p = ops.cast(teacher, "float32")
    log_ratio = ops.log(ops.maximum(p, _TINY)) - ops.log(ops.maximum(ops.cast(student, "float32"), _TINY))
    keys = ops.expand_dims(ops.expand_dims(ops.expand_dims(mask, 1), 1), 1)  # [B, 1, 1, 1, T]
    kl = ops.sum(p * log_ratio * keys, axis=-1)  # [B, K, N, T]
    queries = ops.expand_dims(ops.expand_dims(mask, 1), 1)  # [B, 1, 1, T]
    layers_heads = ops.cast(ops.shape(kl)[1] * ops.shape(kl)[2], "float32")
    return ops.divide_no_nan(ops.sum(kl * queries), tokens * layers_heads)


def replicas_in_sync():
    """How many replicas share the step (1 outside a tf.distribute strategy)."""
    if keras.backend.backend() != "tensorflow":
        return 1
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    return 1 if context is None else context.num_replicas_in_sync


def check_same_vocabulary(teacher, student):
    """The two backbones must map ids to the same tokens."""
    if teacher.vocabulary_size != student.vocabulary_size:
        raise ValueError(
            f"The teacher's and the student's token embeddings have {teacher.vocabulary_size} and "
            f"{student.vocabulary_size} rows: the same ids would mean different tokens. Give the student the teacher's "
            "vocabulary (BertBackbone.from_preset(name, vocabulary_size=...) and set_vocabulary)."
        )
    if teacher.vocabulary is not None and student.vocabulary is not None:
        if list(teacher.vocabulary) != list(student.vocabulary) or teacher.lowercase != student.lowercase:
            first = next(
                (i for i, (a, b) in enumerate(zip(teacher.vocabulary, student.vocabulary)) if a != b), None
            )
            where = (
                f"token {first}: {teacher.vocabulary[first]!r} vs {student.vocabulary[first]!r}"
                if first is not None
                else "casing"
            )
            raise ValueError(
                f"The teacher's and the student's vocabularies differ ({where}): distill into a student "
                "that tokenizes like the teacher."
            )
