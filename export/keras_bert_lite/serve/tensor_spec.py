"""An input's or output's dtype and shape as the server reads them, without TensorFlow: the
attributes of `tf.TensorSpec` that `rest_api` uses (`dtype.name`, `.as_numpy_dtype`,
`.is_integer`, `.is_floating`, `.min`, `.max`; `shape.rank`, `.as_list()`), so that a servable on
LiteRT describes its signature as a SavedModel's does."""

import numpy as np


class TensorSpec:
    """`shape` (list of int or None per axis), `dtype` ("string", "bool" or a numpy dtype's name:
    "float32", "int32", ...), `name`.

    >>> spec = TensorSpec([None, 2], "float32", "probabilities")
    >>> spec.shape.rank, spec.shape.as_list(), spec.dtype.name, spec.dtype.is_floating
    (2, [None, 2], 'float32', True)
    """

    def __init__(self, shape, dtype, name=None):
        self.shape = _Shape(shape)
        self.dtype = _DType(dtype)
        self.name = name

    def __repr__(self):
        return f"TensorSpec(shape={self.shape.as_list()}, dtype={self.dtype.name!r}, name={self.name!r})"


class _Shape:
    def __init__(self, dims):
        self._dims = list(dims)
        self.rank = len(self._dims)

    def as_list(self):
        return list(self._dims)


class _DType:
    def __init__(self, name):
        self.name = name
        self.as_numpy_dtype = object if name == "string" else np.dtype(name).type
        numeric = np.dtype(self.as_numpy_dtype) if name not in ("string", "bool") else None
        self.is_integer = numeric is not None and np.issubdtype(numeric, np.integer)
        self.is_floating = numeric is not None and np.issubdtype(numeric, np.floating)
        limits = np.iinfo(numeric) if self.is_integer else np.finfo(numeric) if self.is_floating else None
        self.min = None if limits is None else limits.min.item() if self.is_floating else int(limits.min)
        self.max = None if limits is None else limits.max.item() if self.is_floating else int(limits.max)
