"""A model rebuilt from its config: another dtype policy, no optimizer state. Keras only, so a
training run on any backend saves its model without it (inference/ is TensorFlow's)."""

import contextlib

import keras


def without_dtypes(config):
    """A model config with every layer's "dtype" entry left out: built from it, every layer
    takes the global dtype policy in force (a saved config pins each layer's own)."""
    if isinstance(config, dict):
        return {k: without_dtypes(v) for k, v in config.items() if k != "dtype"}
    if isinstance(config, list):
        return [without_dtypes(v) for v in config]
    return config


def computes_in(model):
    """The set of compute dtypes of `model`'s layers (a model trained with --precision fp16 or
    bf16 is saved with its mixed policy, and loads computing in float16 or bfloat16)."""
    return {
        layer.dtype_policy.compute_dtype for layer in model._flatten_layers(include_self=True, recursive=True)
    }


def rebuilt(model, policy=None):
    """A copy of `model` from its config, with its weights and vocabulary, without its compile
    state or optimizer. `policy` (e.g. "float32"): every layer built under it instead of the
    dtype policy its config records."""
    config = model.get_config()
    previous = keras.config.dtype_policy()
    if policy is not None:
        config = without_dtypes(config)
        keras.config.set_dtype_policy(policy)
    try:
        # The library's models are functional: built by their constructor, every variable there.
        copy = built_with_weights(lambda: type(model).from_config(config), model.get_weights())
    finally:
        keras.config.set_dtype_policy(previous)
    copy_vocabulary(model, copy)
    return copy


def copy_vocabulary(model, copy):
    """Gives `copy` (a model of the same kind) `model`'s vocabulary and casing, when it has one."""
    source, target = getattr(model, "backbone", model), getattr(copy, "backbone", copy)
    if getattr(source, "vocabulary", None) is not None:
        target.set_vocabulary(source.vocabulary, lowercase=source.lowercase)


def built_with_weights(build, weights):
    """`build()`'s model given `weights` (`model.set_weights`): bit for bit what building it and
    then setting them gives, without drawing the random initial values they replace.

    Drawing them is most of a copy's cost (MiniLM: 0.75 of the 1.3 CPU-s a BertBackbone takes to
    build). The initializer objects are made as before, each drawing its seed from Python's
    `random`, so the seeds of the layers built after the copy (a seeded run's head, its dropout)
    are the same; a variable `weights` does not cover is given its initializer's values after all
    (a seeded Keras initializer gives the same values on every call).

    Args:
        build: callable() -> a built Keras model.
        weights: list of arrays, as `model.get_weights()` gives them; or a function(model) that
            sets every one of the built model's weights (`model.weights`).

    Example:
    >>> import random
    >>> build = lambda: keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> weights = [np.ones((3, 2), "float32"), np.zeros(2, "float32")]
    >>> random.seed(1)
    >>> plain = build()
    >>> plain.set_weights(weights)
    >>> next_seed = random.random()
    >>> random.seed(1)
    >>> copy = built_with_weights(build, weights)
    >>> same = [w.tolist() for w in copy.get_weights()] == [w.tolist() for w in weights]
    >>> same, random.random() == next_seed  # the weights given, the same seeds drawn
    (True, True)
    """
    with _random_initial_values_skipped() as skipped:
        model = build()
    if callable(weights):
        weights(model)
    else:
        model.set_weights(weights)
    covered = {id(variable) for variable in model.weights}
    for variable, initializer in skipped:
        if id(variable) not in covered:
            variable.assign(initializer(variable.shape, dtype=variable.dtype))
    return model


@contextlib.contextmanager
def _random_initial_values_skipped():
    """Within: a variable whose initializer is a seeded random one (Keras' RandomInitializer
    holds an int `seed`) starts as zeros. Yields the [(variable, initializer)] it skipped.

    Keras has no public switch for this: the hook is the backend Variable's
    `_initialize_with_initializer` (3.15); on a Keras without it, initializers run as usual."""
    variable_class = keras.Variable
    original = getattr(variable_class, "_initialize_with_initializer", None)
    skipped = []
    if original is None:
        yield skipped
        return
    own = "_initialize_with_initializer" in vars(variable_class)
    zeros = keras.initializers.Zeros()

    def initialize(variable, initializer):
        if isinstance(getattr(initializer, "seed", None), int):
            skipped.append((variable, initializer))
            initializer = zeros
        original(variable, initializer)

    variable_class._initialize_with_initializer = initialize
    try:
        yield skipped
    finally:
        if own:
            variable_class._initialize_with_initializer = original
        else:
            del variable_class._initialize_with_initializer
