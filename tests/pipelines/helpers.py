"""Running `kbert` in-process from the pipeline tests, and reading what it wrote."""

import collections
import glob
import os

from keras_bert_impl.cli import main


def kbert(*argv):
    return main([str(a) for a in argv])


def records(folder, prefix="pretraining"):
    """The multiset of serialized examples of a folder's shards."""
    import tensorflow as tf

    paths = sorted(glob.glob(os.path.join(folder, f"{prefix}-*-of-*.tfrecord")))
    return collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(paths))
