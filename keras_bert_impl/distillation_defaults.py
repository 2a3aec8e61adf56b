"""The distillation defaults, in one place: the `Distiller`'s terms' and `kbert distill`'s. Plain Python
(no Keras), so the command reads them when it builds its flags without importing Keras."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class DistillationDefaults:
    """Default settings of a distillation, read by the `Distiller`'s terms' arguments and by
    `kbert distill`'s flags (`DISTILLATION_DEFAULTS`).

    Args:
        temperature: the softening of both distributions (Hinton et al. use 2 to 20).
        alpha: the labels' weight of a `LogitsTerm` built in Python: 0, soft targets only, so
            an unlabeled transfer set fits as it is.
        labelled_alpha: the labels' weight of `kbert distill`, whose transfer set always
            holds the labelled --train rows: half soft targets, half labels.
        general_layer_map: the layer map of a `HiddenStatesTerm` or `AttentionTerm` built in
            Python, and of `kbert distill --general`, when none is given: TinyBERT's uniform map.
        general_hidden_weight: the hidden-state weight of general distillation when none is
            given (its only default term); a head's default is 0 (logits alone).
        learning_rates: `kbert distill`'s peak learning rate by student: "preset" (random
            layers), "teacher" (teacher layers), "init" (a given encoder), "general".

    Example:
    >>> DISTILLATION_DEFAULTS.temperature, DISTILLATION_DEFAULTS.labelled_alpha
    (2.0, 0.5)
    """

    temperature: float = 2.0
    alpha: float = 0.0
    labelled_alpha: float = 0.5
    general_layer_map: str = "uniform"
    general_hidden_weight: float = 1.0
    # Turc et al. (2019) fine-tune the compact BERTs at 1e-4 .. 3e-4: random layers take the upper
    # end. A student of teacher layers is not the teacher: one MiniLM layer under a new head reached
    # 0.68 on MR at the teacher's 5e-5 and 0.77 at 2e-4 (bench/experiments/distill_mr.py). General
    # distillation regresses hidden states: the random-layer rate serves it too.
    learning_rates: dict = dataclasses.field(
        default_factory=lambda: {"preset": 3e-4, "teacher": 2e-4, "init": 2e-4, "general": 3e-4}
    )

    def for_run(self, general, student):
        """The defaults of `kbert distill`'s flags that depend on the run: general distillation
        or a head's, and the student's kind ("preset", "teacher" or "init", as in
        `learning_rates`).

        >>> DISTILLATION_DEFAULTS.for_run(general=False, student="teacher")["learning_rate"]
        0.0002
        """
        if general:
            terms = dict(hidden_weight=self.general_hidden_weight)
        else:
            terms = dict(hidden_weight=0.0, temperature=self.temperature, alpha=self.labelled_alpha)
        rate = self.learning_rates["general" if general else student]
        return dict(terms, student_embeddings="teacher", learning_rate=rate)


DISTILLATION_DEFAULTS = DistillationDefaults()
