"""Google's pretraining features: names, dtypes, serialization to tf.train.Example
and the mapping onto `BertPretrainer`'s inputs.

Shape legend: B batch, S max_seq_length, P max_predictions_per_seq.

The names and dtypes are those of google-research/bert's create_pretraining_data.py
(`write_instance_to_example_files`) and run_pretraining.py (`_decode_record`), so
records written here feed Google's run_pretraining.py and theirs feed us.
"""

import tensorflow as tf

# The four features of an unmasked example (what dynamic masking starts from),
# then the three that static masking adds. Order as Google writes them.
BASE_FEATURES = ("input_ids", "input_mask", "segment_ids")
MASK_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
NSP_FEATURE = "next_sentence_labels"
# Google's next_sentence_labels: 0 = B is the actual next segment, 1 = B is random.
IS_NEXT, NOT_NEXT = 0, 1


def feature_spec(max_seq_length, max_predictions_per_seq, masked=True):
    """tf.io.parse_single_example spec; int64 on disk as Google writes it."""
    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in BASE_FEATURES}
    if masked:
        spec["masked_lm_positions"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
        spec["masked_lm_ids"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
        spec["masked_lm_weights"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32)
    spec[NSP_FEATURE] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def tensor_signature(max_seq_length, max_predictions_per_seq, masked=True):
    """`feature_spec` as tf.TensorSpecs of what the pipeline carries: int32 ids (int64 only on
    disk), float32 weights."""
    spec = feature_spec(max_seq_length, max_predictions_per_seq, masked=masked)
    return {
        name: tf.TensorSpec(feature.shape, tf.int32 if feature.dtype == tf.int64 else feature.dtype)
        for name, feature in spec.items()
    }


def instance_to_example(instance, max_seq_length, max_predictions_per_seq, pad_id, masked=True):
    """A `PretrainingInstance` -> dict of padded lists under Google's names (what
    `serialize_example` writes): ids padded with `pad_id`, unused prediction slots
    with position 0, id 0 and weight 0."""
    pad = max_seq_length - len(instance.token_ids)
    example = {
        "input_ids": list(instance.token_ids) + [pad_id] * pad,
        "input_mask": [1] * len(instance.token_ids) + [0] * pad,
        "segment_ids": list(instance.segment_ids) + [0] * pad,
    }
    if masked:
        slots = max_predictions_per_seq - len(instance.masked_lm_positions)
        example["masked_lm_positions"] = list(instance.masked_lm_positions) + [0] * slots
        example["masked_lm_ids"] = list(instance.masked_lm_ids) + [0] * slots
        example["masked_lm_weights"] = [1.0] * len(instance.masked_lm_positions) + [0.0] * slots
    example[NSP_FEATURE] = [NOT_NEXT if instance.is_random_next else IS_NEXT]
    return example


def serialize_example(example):
    """A dict of padded lists (Google's names) -> serialized tf.train.Example bytes."""
    feature = {}
    for name in BASE_FEATURES + MASK_FEATURES + (NSP_FEATURE,):
        if name not in example:
            continue
        if name == "masked_lm_weights":
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=example[name]))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=example[name]))
    # deterministic: the feature map in key order. Otherwise its order follows a per-process hash,
    # and the same example gave other bytes in another process (a pipeline's workers).
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(deterministic=True)


def to_pretrainer_inputs(features):
    """Google-named features [B, ...] -> (x, y, sample_weight) for `BertPretrainer.fit`.

    x: token_ids, segment_ids, padding_mask, mask_positions (int32).
    y: mlm_logits <- masked_lm_ids [B, P]; nsp_logits <- next_sentence_labels [B]
       (0 = IsNext, 1 = NotNext, Google's convention and the NSP head's).
    sample_weight: mlm_logits <- masked_lm_weights, so padded prediction slots
       (weight 0) do not count in the MLM loss; nsp_logits <- ones [B], because
       Keras 3 wants a weight for every output once sample_weight is a dict
       (a dict with only "mlm_logits" fails in fit with KeyError: 'nsp_logits').
    """
    x = {
        "token_ids": tf.cast(features["input_ids"], tf.int32),
        "segment_ids": tf.cast(features["segment_ids"], tf.int32),
        "padding_mask": tf.cast(features["input_mask"], tf.int32),
        "mask_positions": tf.cast(features["masked_lm_positions"], tf.int32),
    }
    labels = tf.cast(features[NSP_FEATURE], tf.int32)
    y = {
        "mlm_logits": tf.cast(features["masked_lm_ids"], tf.int32),
        "nsp_logits": tf.reshape(labels, tf.shape(labels)[:1]),  # [B, 1] on disk -> [B]
    }
    sample_weight = {
        "mlm_logits": tf.cast(features["masked_lm_weights"], tf.float32),
        "nsp_logits": tf.ones(tf.shape(labels)[:1], tf.float32),
    }
    return x, y, sample_weight
