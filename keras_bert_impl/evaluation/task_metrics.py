"""A task model's metrics on a dataset: the one home `kbert evaluate`, `finetune` and `distill`
(and a Python user) call, so the numbers of a run's metrics.json and of `kbert evaluate` are
the same function's.

Duck-typed on the model (`predict_on_batch`) and the dataset (an iterable of (x, y) or
(x, y, w) batches): no TensorFlow import here, like the rest of `evaluation`.
"""

import numpy as np

from keras_bert_impl.evaluation.classification_metrics import classification_metrics
from keras_bert_impl.evaluation.multilabel_metrics import multilabel_metrics
from keras_bert_impl.evaluation.squad_decoding import decode_squad_predictions, squad_gold_answers
from keras_bert_impl.evaluation.squad_metrics import squad_metrics
from keras_bert_impl.evaluation.tagging_metrics import tagging_metrics
from keras_bert_impl.evaluation.word_tags import tags_from_wordpieces
from keras_bert_impl.tasks import SEQUENCE_TASKS


def _predict_on_batch(model, x, rows):
    """`model.predict_on_batch(x)`, one output row per input row under any strategy.

    Keras 3.15's `predict_on_batch` on a model built in a tf.distribute strategy's scope runs
    the whole batch on every replica and concatenates the results: two mirrored replicas gave
    40 rows for 20 examples. `predict` splits the batch over the replicas instead.
    """
    replicas = getattr(getattr(model, "distribute_strategy", None), "num_replicas_in_sync", 1)
    if replicas > 1:
        return model.predict(x, batch_size=rows, verbose=0)
    return model.predict_on_batch(x)


def _gather(model, dataset, progress=None):
    """Predictions and targets over a dataset of (x, y) or (x, y, w) batches, in order."""
    outputs, ys, ws = [], [], []
    for batch in dataset:
        x, y = batch[0], batch[1]
        rows = len(np.asarray(x["token_ids"]))
        outputs.append({k: np.asarray(v) for k, v in _predict_on_batch(model, x, rows).items()})
        if progress is not None:
            progress.update(rows)
        ys.append(y if not isinstance(y, dict) else {k: np.asarray(v) for k, v in y.items()})
        if len(batch) > 2:
            ws.append(np.asarray(batch[2]))
    joined = {k: np.concatenate([o[k] for o in outputs]) for k in outputs[0]}
    return joined, ys, ws


def sequence_metrics(task, outputs, targets, label_names):
    """Metrics of a classifier's outputs ({"logits"} or {"probabilities"}, [N, C]) against its
    targets (class ids [N], or multi-hot [N, C]); `task` is "classification", "pair" or "multilabel".

    Example:
    >>> logits = np.array([[2.0, 0.0], [0.0, 1.0]])
    >>> sequence_metrics("classification", {"logits": logits}, [0, 0], ["a", "b"])["accuracy"]
    0.5
    """
    if task in ("classification", "pair"):
        logits = outputs.get("logits", outputs.get("probabilities"))
        return classification_metrics(
            np.asarray(targets), logits.argmax(-1), num_classes=logits.shape[-1], label_names=label_names
        )
    from_logits = "logits" in outputs
    scores = outputs["logits"] if from_logits else outputs["probabilities"]
    return multilabel_metrics(np.asarray(targets), scores, from_logits=from_logits, label_names=label_names)


def compute_metrics(task, model, reader, dataset, label_names, progress=None):
    """The task's metrics (plain floats and ints) of `model` on `dataset` read by `reader`.

    Args:
        task: str. "classification", "pair", "multilabel", "tagging" or "squad".
        model: a task model (`predict_on_batch` giving its named outputs).
        reader: the reader that built `dataset` (SQuAD decodes answers from its `features`).
        dataset: iterable of (x, y) or (x, y, sample_weight) batches (tagging: with the weights).
        label_names: list of str, or None for SQuAD.
        progress: optional object with `update(n)` and `done()`.
    """
    outputs, ys, ws = _gather(model, dataset, progress)
    if progress is not None:
        progress.done()
    if task in SEQUENCE_TASKS:
        return sequence_metrics(task, outputs, np.concatenate([np.asarray(y) for y in ys]), label_names)
    if task == "tagging":
        tags = np.concatenate([np.asarray(y) for y in ys])  # [N, S]
        weights = np.concatenate(ws)  # [N, S]; > 0 on the wordpiece that carries each word's tag
        gold, pred = tags_from_wordpieces(tags, outputs["logits"].argmax(-1), weights, label_names)
        return tagging_metrics(gold, pred)
    predictions = decode_squad_predictions(reader.features, outputs["start_logits"], outputs["end_logits"])
    return squad_metrics(predictions, squad_gold_answers(reader.features))
