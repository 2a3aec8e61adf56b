"""BERT's learning-rate schedule: linear warm-up, then polynomial (linear by default) decay."""

import keras
from keras import ops

from keras_bert_impl.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak * step / warmup_steps while step < warmup_steps, then
    (peak - end) * (1 - (step - warmup) / (decay_steps - warmup)) ** power + end,
    held at `end` after `decay_steps`.

    The decay starts where warm-up ends, so the rate is continuous (transformers'
    `get_linear_schedule_with_warmup` when power=1 and end=0). Google's
    optimization.py and Model Garden count the (linear) decay from step 0 instead: from
    the end of warm-up on, their rate is this one's times (1 - warmup_steps / decay_steps)
    (bench/experiments/pretrain_reference_tfm.py runs theirs).

    Args:
        peak_learning_rate: float. Rate reached at the end of warm-up.
        decay_steps: int. Total training steps; the rate is `end_learning_rate` from here on.
        warmup_steps: int. Steps of linear warm-up (0 for none); must be < decay_steps.
        end_learning_rate: float.
        power: float. 1.0 is linear decay.

    Example:
    >>> schedule = WarmupPolynomialDecay(5e-5, decay_steps=1000, warmup_steps=100)
    >>> [round(float(schedule(step)), 10) for step in (0, 50, 100, 550, 1000, 2000)]
    [0.0, 2.5e-05, 5e-05, 2.5e-05, 0.0, 0.0]
    """

    def __init__(self, peak_learning_rate, decay_steps, warmup_steps=0, end_learning_rate=0.0, power=1.0):
        if not peak_learning_rate > 0:
            raise ValueError(
                f"peak_learning_rate must be > 0. Received: peak_learning_rate={peak_learning_rate!r}"
            )
        check_positive_int("decay_steps", decay_steps)
        if (
            isinstance(warmup_steps, bool)
            or not isinstance(warmup_steps, int)
            or not 0 <= warmup_steps < decay_steps
        ):
            raise ValueError(
                f"warmup_steps must be an int in [0, decay_steps={decay_steps}). "
                f"Received: warmup_steps={warmup_steps!r}. "
                "BERT warms up over about 10% of the steps."
            )
        self.peak_learning_rate = float(peak_learning_rate)
        self.decay_steps = decay_steps
        self.warmup_steps = warmup_steps
        self.end_learning_rate = float(end_learning_rate)
        self.power = float(power)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warmup = ops.cast(self.warmup_steps, "float32")
        warm_rate = self.peak_learning_rate * step / ops.maximum(warmup, 1.0)
        progress = ops.clip((step - warmup) / float(self.decay_steps - self.warmup_steps), 0.0, 1.0)
        decay_rate = (self.peak_learning_rate - self.end_learning_rate) * (
            1.0 - progress
        ) ** self.power + self.end_learning_rate
        return ops.where(step < warmup, warm_rate, decay_rate)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "decay_steps": self.decay_steps,
            "warmup_steps": self.warmup_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
        }
