"""Attributes set on a functional model before `keras.Model.__init__`, on every backend.

Our functional models (`BertBackbone`, the heads) create their layers first, keep them as
attributes, wire the graph and only then call `keras.Model.__init__(inputs, outputs)`, the
order KerasHub's models use too. On the PyTorch backend a Keras model is a
`torch.nn.Module`, whose `__setattr__` refuses a module-valued attribute before
`torch.nn.Module.__init__` has run ("cannot assign module before Module.__init__() call").
Those early attributes need no tracking of their own: every layer they hold is part of the
functional graph, which the model tracks once it is initialised. So until then they are
set as plain Python attributes; afterwards Keras' own `__setattr__` takes over again.
"""

import keras


def set_attribute(model, name, value, keras_setattr):
    """Sets `model.name = value`: plain Python before a torch-backend model is initialised,
    else through `keras_setattr` (the class's parent `__setattr__`, bound)."""
    if keras.backend.backend() == "torch" and "_modules" not in model.__dict__:
        object.__setattr__(model, name, value)
    else:
        keras_setattr(name, value)
