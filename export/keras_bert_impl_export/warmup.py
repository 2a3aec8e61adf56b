"""TF Serving warm-up requests: `assets.extra/tf_serving_warmup_requests` in a SavedModel
version folder, a TFRecord file of PredictionLog protos (tensorflow-serving-api's own
classes) that the server replays after loading, so the first user request does not pay
for graph optimisation."""

import os

import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")


def write_warmup_requests(version_dir, model_name, requests, signature_name="serving_default"):
    """Writes one PredictRequest per dict in `requests` ({input name: array or list}).

    Called on a version folder that is still being built (the export renames it into
    place when everything is written), so the file needs no atomic write of its own.
    """
    path = os.path.join(version_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for inputs in requests:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature_name)
            )
            for name, value in inputs.items():
                request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
            log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
    return path


def read_warmup_requests(version_dir):
    """[(model name, signature name, {input name: numpy array})] of the warm-up file."""
    requests = []
    for record in tf.data.TFRecordDataset(os.path.join(version_dir, WARMUP_FILE)):
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        request = log.predict_log.request
        inputs = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
        requests.append((request.model_spec.name, request.model_spec.signature_name, inputs))
    return requests
