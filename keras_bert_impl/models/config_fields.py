"""Checks a config dict against a constructor before building from it."""

import inspect


def check_config_fields(cls, config, extra=()):
    """Raises ValueError naming unknown and missing fields of `config` for `cls`."""
    if not isinstance(config, dict):
        raise ValueError(f"{cls.__name__} config must be a dict. Received: {type(config).__name__}")
    params = inspect.signature(cls.__init__).parameters
    known = {n for n, p in params.items() if n != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    required = {n for n in known if params[n].default is inspect.Parameter.empty}
    known |= set(extra)
    unknown = sorted(set(config) - known)
    missing = sorted(required - set(config))
    if unknown or missing:
        raise ValueError(
            f"Invalid {cls.__name__} config: unknown fields {unknown}, missing fields {missing}. Known "
            f"fields: {sorted(known)}. Fix the config JSON (a typo or a config written for another model)."
        )
