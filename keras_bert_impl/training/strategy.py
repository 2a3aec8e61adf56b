"""One factory for tf.distribute strategies, reading TF_CONFIG / TPU settings the standard way.

tf.distribute is TensorFlow's: on the JAX backend, data parallelism is Keras' own
`keras.distribution.DataParallel` (tests/backends/test_backends.py), and
`create_strategy` says so.
"""

import functools
import json
import os

from keras_bert_impl.backend_support import require_tensorflow

STRATEGIES = ("auto", "one-device", "mirrored", "multi-worker", "tpu")


@functools.cache
def _keras_fit_multi_worker_strategy(tf):
    """MultiWorkerMirroredStrategy whose `reduce` takes what Keras 3's `fit` passes it.

    Keras 3.15's TensorFlow trainer (keras/src/backend/tensorflow/trainer.py) stops `fit`
    on more than one worker twice: `_maybe_symbolic_build` reduces a whole (inputs, labels)
    structure, which the collective all-reduce cannot convert to a tensor, and every step's
    logs (scalars) are reduced along `axis=0`, which a scalar lacks. Reducing leaf by leaf,
    and scalars over the replicas only, is what one machine's MirroredStrategy already does.
    Same family as keras-team/keras#20329. Checked by tests/training/test_multi_worker.py.
    (A class made on first use, so that importing this module needs no TensorFlow.)
    """

    class KerasFitMultiWorkerMirroredStrategy(tf.distribute.MultiWorkerMirroredStrategy):
        def reduce(self, reduce_op, value, axis):
            def reduce_leaf(leaf):
                leaf_axis = None if axis is not None and leaf.shape.rank == 0 else axis
                return super(KerasFitMultiWorkerMirroredStrategy, self).reduce(reduce_op, leaf, leaf_axis)

            return tf.nest.map_structure(reduce_leaf, value)

    return KerasFitMultiWorkerMirroredStrategy


@functools.cache
def _keras_fit_mirrored_strategy(tf):
    """MirroredStrategy whose `reduce` takes the uneven batch Keras 3's `fit` may pass it.

    At the start of every `fit` call, Keras 3.15's TensorFlow trainer (`_maybe_symbolic_build`
    in keras/src/backend/tensorflow/trainer.py) takes the first distributed batch and reduces
    it with `reduce("MEAN", batch, axis=None)`, only to read its shapes and dtypes. When that
    batch has a row count the replicas do not share evenly (a partial last batch shuffled to
    the front, or the batch a resumed run starts at), the replicas' shares differ in size and
    the element-wise mean fails (`AddN`: [2, S] != [1, S]), so the run crashes. An element-wise
    mean of shares of different shapes has no value; here it is the first replica's share, which
    has the batch's structure and dtypes. Every other reduce is MirroredStrategy's own.
    Checked by tests/training/test_strategy.py.
    """

    class KerasFitMirroredStrategy(tf.distribute.MirroredStrategy):
        def reduce(self, reduce_op, value, axis):
            if axis is not None:
                return super().reduce(reduce_op, value, axis)

            def reduce_leaf(leaf):
                shares = self.experimental_local_results(leaf)
                if len({tuple(share.shape) for share in shares}) > 1:
                    return shares[0]
                return super(KerasFitMirroredStrategy, self).reduce(reduce_op, leaf, axis)

            return tf.nest.map_structure(reduce_leaf, value)

    return KerasFitMirroredStrategy


def create_strategy(name="auto", tpu=None):
    """Returns a tf.distribute.Strategy.

    Args:
        name: "auto" (multi-worker if TF_CONFIG names several workers, else mirrored
            over every GPU when there are several, else one device), "one-device",
            "mirrored" (all local GPUs, or every logical CPU device when there are no GPUs),
            "multi-worker" (MultiWorkerMirroredStrategy from TF_CONFIG), "tpu".
        tpu: TPU name or address for "tpu" (None: the TPU_NAME environment / local TPU).
    """
    if name not in STRATEGIES:
        raise ValueError(f"strategy must be one of {list(STRATEGIES)}. Received: strategy={name!r}")
    tf = require_tensorflow(
        "create_strategy (tf.distribute)",
        "On JAX, train data-parallel with "
        "keras.distribution.set_distribution(keras.distribution.DataParallel()) "
        "before building the model; on PyTorch, train on one device.",
    )
    if name == "auto":
        workers = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {}).get("worker", [])
        if len(workers) > 1:
            name = "multi-worker"
        elif len(tf.config.list_logical_devices("GPU")) > 1:
            name = "mirrored"
        else:
            name = "one-device"
    if name == "one-device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        return _keras_fit_mirrored_strategy(tf)(devices)
    if name == "multi-worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError(
                "strategy='multi-worker' needs TF_CONFIG describing the cluster and this worker's task, "
                'e.g. {"cluster": {"worker": ["host1:port", "host2:port"]}, '
                '"task": {"type": "worker", "index": 0}}.'
            )
        return _keras_fit_multi_worker_strategy(tf)()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
