"""`from_config` of a layer or model whose config holds another layer (a head's backbone, the
masked-LM head's tied embedding)."""

import keras


def deserialize_sublayers(config, *names):
    """A copy of `config` with its `names` entries deserialized: the layers `get_config` wrote with
    `keras.layers.serialize`. An entry that is a layer already is kept as it is."""
    config = dict(config)
    for name in names:
        if isinstance(config[name], dict):
            config[name] = keras.layers.deserialize(config[name])
    return config
