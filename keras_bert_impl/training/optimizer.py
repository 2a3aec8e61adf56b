"""AdamW as BERT trains: warm-up + decay, no weight decay on LayerNorm and biases, clipping."""

from keras_bert_impl.training.global_clip_adamw import GlobalClipAdamW
from keras_bert_impl.training.warmup_polynomial_decay import WarmupPolynomialDecay

# Google's optimization.py excludes "LayerNorm", "layer_norm" and "bias" by name;
# our LayerNorm variables are gamma/beta under *layer_norm* layers.
NO_DECAY_NAMES = ("bias", "gamma", "beta", "layer_norm")


def create_optimizer(
    learning_rate,
    train_steps,
    warmup_steps=None,
    weight_decay=0.01,
    end_learning_rate=0.0,
    power=1.0,
    global_clipnorm=1.0,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,
):
    """AdamW with BERT's settings (`GlobalClipAdamW`: Keras' AdamW, clipping the
    all-replica gradient under a distribution strategy).

    Args:
        learning_rate: float. Peak learning rate (e.g. 5e-5 for fine-tuning, 1e-4 for pretraining).
        train_steps: int. Total optimizer steps; the rate decays to `end_learning_rate` by then.
        warmup_steps: int or None. Linear warm-up steps; None = 10% of `train_steps`.
        weight_decay: float. Decoupled weight decay, not applied to biases or LayerNorm.
        global_clipnorm: float or None. Clip the global gradient norm (BERT uses 1.0).
        beta_1, beta_2, epsilon: Adam's; epsilon 1e-6 as in Google's BERT.

    Returns:
        GlobalClipAdamW (a keras.optimizers.AdamW)
    """
    if warmup_steps is None:
        warmup_steps = train_steps // 10
    schedule = WarmupPolynomialDecay(learning_rate, train_steps, warmup_steps, end_learning_rate, power)
    optimizer = GlobalClipAdamW(
        learning_rate=schedule,
        weight_decay=weight_decay,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        global_clipnorm=global_clipnorm,
    )
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
    return optimizer
