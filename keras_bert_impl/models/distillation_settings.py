"""A distillation's settings checked and resolved before any model is built: what the
`Distiller` checks of its own arguments, and what `kbert distill` asks it to check of its
flags before it loads a teacher (one check, one wording; the command only names the flag).

Every refusal is a `DistillationArgumentError` naming the argument. What needs the models
(the layer map against their depths, equal head counts for attention) stays with the
`Distiller`.
"""

from keras_bert_impl.distillation_defaults import DISTILLATION_DEFAULTS
from keras_bert_impl.models.distillation_argument_error import DistillationArgumentError
from keras_bert_impl.validation import check_fraction, check_non_negative

TRANSFER_WEIGHTS = ("hidden_weight", "attention_weight", "embedding_weight")


def check_distillation_settings(
    general, temperature, alpha, hidden_weight, attention_weight, embedding_weight, layer_map
):
    """The settings with the defaults filled in, as a dict of the argument names.

    general: backbones (no logits term: alpha must be 0, a transfer weight > 0). hidden_weight
    None: 1 for general distillation, else 0. layer_map None with a mapped term on in general
    distillation: "uniform".

    Example:
    >>> check_distillation_settings(True, 2.0, 0.0, None, 0.0, 0.0, None)["layer_map"]
    'uniform'
    """
    if hidden_weight is None:
        hidden_weight = DISTILLATION_DEFAULTS.general_hidden_weight if general else 0.0
    settings = {}
    for name, value in zip(TRANSFER_WEIGHTS, (hidden_weight, attention_weight, embedding_weight)):
        settings[name] = _argument(name, check_non_negative, name, value)
    settings["alpha"] = _argument("alpha", check_fraction, "alpha", alpha, False, False)
    settings["temperature"] = temperature
    if not general and (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not 0 < temperature < float("inf")
    ):
        raise DistillationArgumentError(
            "temperature",
            f"temperature must be a finite number > 0 (1 = the plain softmax; "
            f"Hinton et al. use 2 to 20). Received: temperature={temperature!r}",
        )
    mapped_terms = settings["hidden_weight"] > 0 or settings["attention_weight"] > 0
    if general:
        if settings["alpha"]:
            raise DistillationArgumentError(
                "alpha",
                f"alpha={alpha} weighs the labels' loss, but backbones have no "
                "labels or logits (general distillation): pass alpha=0, or heads.",
            )
        if not any(settings[name] for name in TRANSFER_WEIGHTS):
            raise DistillationArgumentError(
                "hidden_weight",
                "General distillation learns from the teacher's layers only: give hidden_weight, "
                "attention_weight or embedding_weight a value > 0. Received: all 0.",
            )
        if layer_map is None and mapped_terms:
            layer_map = DISTILLATION_DEFAULTS.general_layer_map
    if mapped_terms and layer_map is None:
        raise DistillationArgumentError(
            "layer_map",
            f"hidden_weight={settings['hidden_weight']} and attention_weight={settings['attention_weight']} "
            "compare mapped layers: pass layer_map (a teacher layer per student layer, or 'uniform').",
        )
    if layer_map is not None and not mapped_terms:
        raise DistillationArgumentError(
            "layer_map",
            f"layer_map={layer_map!r} maps layers for hidden_weight and "
            "attention_weight, which are both 0: give one of them a weight > 0, or drop "
            "layer_map.",
        )
    settings["layer_map"] = layer_map
    return settings


def _argument(argument, check, *args):
    """`check(*args)`, its ValueError raised as a DistillationArgumentError naming `argument`."""
    try:
        return check(*args)
    except ValueError as e:
        raise DistillationArgumentError(argument, str(e)) from None
