"""A distillation's data: the transfer set a `Distiller` fits on, as a `TrainingSpec`'s data."""

import dataclasses
import math
from typing import Any

from keras_bert_impl.data.transfer_dataset import transfer_dataset


@dataclasses.dataclass(frozen=True, kw_only=True)
class TransferSet:
    """A distillation's data, what a `TrainingSpec`'s `data` function returns for a `Distiller`
    (a `TrainingData` with its teacher): the labelled rows and unlabeled texts, tokenized by
    the teacher's `preprocessor` in the graph, every epoch in an order of (seed, epoch) alone
    (`transfer_dataset`, so a resumed run sees the same batches), and the validation data.

    Args:
        teacher: the model the student learns from.
        preprocessor: a `BertPreprocessor` with the teacher's vocabulary, at the run's length.
        batch_size, seed, epochs: the batches, their order's seed, the epochs of the run.
        rows: the labelled rows as (texts, texts_b, targets), as `ClassificationReader.read_examples`
            gives them (texts_b None for single texts); targets None for texts alone.
        unlabeled: texts the teacher labels as the student trains (single texts).
        validation: what `fit` validates on (e.g. a reader's dataset), or None.
        held_out: instead of `validation`, held-out texts: the loss on them (general distillation).
        length_buckets: batch rows of similar length together, each batch cut to its longest.
        task, reader: a head's task and the reader of its validation data (its metrics), or None.
        record: dict of JSON values a run records of its data (e.g. the files and their layout);
            `facts` adds the task, the pooling and the label names of a head's teacher to them.
        blank_lines: how many blank lines the unlabeled texts' file held (for `describe`).

    Example:
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "fine"]
    >>> preprocessor = BertPreprocessor(vocabulary, sequence_length=8)
    >>> data = TransferSet(teacher=None, preprocessor=preprocessor, batch_size=2, seed=0, epochs=1,
    ...                    rows=(["good", "bad"], None, [1, 0]), unlabeled=["fine"])
    >>> data.describe(), [int(x["label_weight"].shape[0]) for x, y in data.dataset_fn()]
    ('2 labelled + 1 unlabeled examples, 2 steps x 1 epochs', [2, 1])
    """

    teacher: Any
    preprocessor: Any
    batch_size: int
    seed: int
    epochs: int
    rows: tuple = ((), None, None)
    unlabeled: tuple = ()
    validation: Any = None
    held_out: tuple = ()
    length_buckets: bool = False
    task: str = None
    reader: Any = None
    record: dict = dataclasses.field(default_factory=dict)
    blank_lines: int = 0

    def __post_init__(self):
        if self.held_out and self.validation is not None:
            raise ValueError("Give validation or held_out, not both. Received: both")
        if self.held_out:
            # One pass, not bucketed: the validation loss is a mean, its batches' order does not matter.
            texts = list(self.held_out)
            held_out = transfer_dataset(
                self.preprocessor, [], None, None, texts, self.batch_size, self.seed, 1, False
            )
            object.__setattr__(self, "validation", held_out)

    @property
    def steps_per_epoch(self):
        return math.ceil((len(self.rows[0]) + len(self.unlabeled)) / self.batch_size)

    @property
    def facts(self):
        """What a run records of its data: `record`, the length, the steps and the batching, and a
        head's task, pooling and label names."""
        batches = {"steps_per_epoch": self.steps_per_epoch, "length_buckets": self.length_buckets}
        head = {}
        if self.task is not None:
            head = dict(
                task=self.task, pooling=self.teacher.pooling, label_names=list(self.teacher.label_names)
            )
        return {**self.record, **head, "seq_len": self.preprocessor.sequence_length, **batches}

    def describe(self):
        """The examples, steps and epochs in words (a log line's)."""
        skipped = f" ({self.blank_lines} blank lines skipped)" if self.blank_lines else ""
        if self.task is None and not len(self.rows[0]):
            counted = f"{len(self.unlabeled)} texts"
        else:
            counted = f"{len(self.rows[0])} labelled + {len(self.unlabeled)} unlabeled examples"
        return f"{counted}{skipped}, {self.steps_per_epoch} steps x {self.epochs} epochs"

    def dataset_fn(self):
        """Every epoch's batches, anew (`transfer_dataset`)."""
        return transfer_dataset(
            self.preprocessor,
            *self.rows,
            self.unlabeled,
            self.batch_size,
            self.seed,
            self.epochs,
            self.length_buckets,
        )
