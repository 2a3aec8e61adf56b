"""Masks and masked reductions shared by attention and the heads (keras.ops only).

Shape legend: B batch, F query length, T key length (or sequence length), H hidden size.

One home for how padding is kept out of a result: attention's boolean and
additive masks, the span labeler's padded logits, and the embedder's and
classifier's pooling over real tokens.
"""

from keras import ops

# New axes are added with ops.expand_dims, not `x[:, None]`: on TensorFlow the indexing form
# is a StridedSlice with a new-axis mask, which TFLite converts only at fixed shapes, so an
# exported model could not be resized to another batch or sequence length.

# Added where a position must not count, before a softmax or a max. Attention's
# softmax runs in float32, so a finite value this large drives masked
# probabilities to exactly 0 without producing inf - inf = NaN.
MASK_VALUE = -1e9


def merge_masks(padding_mask, attention_mask, use_causal_mask, query_length, key_length):
    """Combines the optional masks into one boolean [B or 1, 1 or F, T] mask (True = attend),
    or None when there is nothing to mask.

    Args:
        padding_mask: None or [B, T], 1 for real key tokens.
        attention_mask: None, [B, T] or [B, F, T], True/1 = attend.
        use_causal_mask: bool. Key j visible from query i only when j <= i.
        query_length, key_length: F and T (ints or scalar tensors).
    """
    mask = None
    if padding_mask is not None:
        mask = ops.expand_dims(ops.cast(padding_mask, "bool"), 1)  # [B, 1, T]
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")
        if len(attention_mask.shape) == 2:  # a [B, T] padding-style mask
            attention_mask = ops.expand_dims(attention_mask, 1)
        mask = attention_mask if mask is None else ops.logical_and(mask, attention_mask)
    if use_causal_mask:
        rows = ops.expand_dims(ops.arange(query_length), 1)  # [F, 1]
        cols = ops.expand_dims(ops.arange(key_length), 0)  # [1, T]
        causal = ops.expand_dims(ops.greater_equal(rows, cols), 0)  # [1, F, T]
        mask = causal if mask is None else ops.logical_and(mask, causal)
    return mask


def mask_bias(mask, dtype="float32"):
    """0 where `mask` is true (or 1), MASK_VALUE where it is false (or 0): the additive form."""
    return (1.0 - ops.cast(mask, dtype)) * MASK_VALUE


def masked_mean(values, padding_mask):
    """The mean of `values` [B, T, H] over the positions where `padding_mask` [B, T] is 1 -> [B, H].

    A row without any real token gives zeros (the sum, 0, divided by 1), never NaN.
    """
    mask = ops.expand_dims(ops.cast(padding_mask, values.dtype), -1)  # [B, T, 1]
    count = ops.maximum(ops.sum(mask, axis=1), 1.0)  # [B, 1]
    return ops.sum(values * mask, axis=1) / count


def masked_max(values, padding_mask):
    """The maximum of `values` [B, T, H] over the positions where `padding_mask` [B, T] is 1 -> [B, H].

    A row without any real token gives MASK_VALUE in every dimension.
    """
    bias = ops.expand_dims(mask_bias(padding_mask, values.dtype), -1)  # [B, T, 1]
    return ops.max(values + bias, axis=1)
