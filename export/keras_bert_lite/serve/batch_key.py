"""What decides which requests may share one model call."""

from typing import NamedTuple


class BatchKey(NamedTuple):
    """Requests with equal keys are merged into one batch by the DynamicBatcher: the same
    model version and signature, and the same per-example shape of every input.

    Fields:
        model_name: str. The model's name in `/v1/models/NAME`, or its `batch_group` where it
            has one (LoRA adapters over one backbone: requests to several models merge).
        version: int. Its version.
        signature: str. The signature called ("serving_default").
        input_shapes: tuple of (input name, per-example shape), sorted by name.
    """

    model_name: str
    version: int
    signature: str
    input_shapes: tuple

    @classmethod
    def of(cls, model, signature, inputs):
        """The key of a request to `model` (a ServableModel) with `inputs` {name: array [B, ...]}."""
        return cls(
            getattr(model, "batch_group", None) or model.name,
            model.version,
            signature,
            tuple((k, v.shape[1:]) for k, v in sorted(inputs.items())),
        )
