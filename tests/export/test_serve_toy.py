"""`kbert serve` on a toy SavedModel (not BERT: `kbert serve` serves any SavedModel) whose
signatures TF Serving's REST rules treat specially: outputs with no batch dimension (a scalar,
a constant table), NaN and infinite outputs, a gather that fails on one example; laid out
with a zero-padded version folder (007) and a stray file beside the models, and start-up
mistakes that must be one line each."""

import concurrent.futures
import json
import socket
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from tests.export.test_serve import Server, _env

pytestmark = pytest.mark.slow


class _Toy(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def half_plus_two(self, x):
        return {"y": x * 0.5 + 2.0}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def with_table(self, x):
        return {"y": x, "table": tf.constant([10.0, 20.0, 30.0, 40.0])}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def with_scalar(self, x):
        return {"y": x * 0.5, "count": tf.size(x)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def log(self, x):
        return {"y": tf.math.log(x)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32, name="i")])
    def lookup(self, i):
        return {"y": tf.gather(tf.constant([1.0, 2.0, 3.0, 4.0]), i)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32, name="n")])
    def busy(self, n):
        """max(n) products of 256 x 256 matrices: a call that holds the worker a while."""
        m = tf.eye(256) * 0.5 + 0.5 / 256.0

        def step(i, a):
            return i + 1, tf.matmul(a, m)

        _, a = tf.while_loop(lambda i, a: i < tf.reduce_max(n), step, (0, tf.eye(256)))
        return {"y": n + tf.cast(tf.reduce_sum(a) * 0.0, tf.int32)}


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """An export-like folder: serving/toy/007 (TF Serving reads it as version 7) and a stray
    serving/.DS_Store; and a SavedModel without signatures."""
    root = tmp_path_factory.mktemp("toy_export")
    toy = _Toy()
    signatures = {
        "serving_default": toy.half_plus_two,
        "with_table": toy.with_table,
        "with_scalar": toy.with_scalar,
        "log": toy.log,
        "lookup": toy.lookup,
        "busy": toy.busy,
    }
    tf.saved_model.save(toy, str(root / "serving" / "toy" / "007"), signatures=signatures)
    (root / "serving" / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    tf.saved_model.save(tf.Module(), str(root / "nosig" / "1"))
    return root


@pytest.fixture(scope="module")
def server(export):
    serving = Server(
        "--model", export, "--max-batch-size", "2", "--max-enqueued-batches", "3", "--batch-timeout-ms", "200"
    )
    yield serving
    status, _, err = serving.stop()
    assert status == 0, err[-3000:]
    assert "toy signature(s) with_scalar, with_table: an input or output has no batch dimension first" in err
    # Every request read was answered once (a NaN answer was counted, then failed as a 500, twice),
    # but the one whose client left first (test_a_request_whose_client_left_is_not_computed).
    accepted = int(err.split("stopped: ")[1].split(" predict requests accepted")[0])
    assert (
        f"{accepted} predict requests accepted, {accepted - 1} answered, 1 dropped (their clients left first)"
        in err
    ), err[-1000:]


def _predict(server, body):
    return server.request("POST", "/v1/models/toy:predict", body, timeout=30)


def test_a_zero_padded_version_beside_a_stray_file_is_served(server):
    assert server.name == "toy"
    assert server.request("GET", "/v1/models/toy")[1]["model_version_status"][0]["version"] == "7"
    assert _predict(server, {"instances": [1.0, 2.0, 3.0]}) == (200, {"predictions": [2.5, 3.0, 3.5]})


def test_outputs_without_a_batch_dimension_are_whole_or_refused_never_cut(server):
    def table(x):
        return _predict(server, {"signature_name": "with_table", "inputs": [x]})

    # Concurrent clients (once merged, each got one entry of the table) each get the whole table.
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(table, [1.0, 2.0, 3.0, 4.0]))
    for x, answer in zip([1.0, 2.0, 3.0, 4.0], answers):
        assert answer == (200, {"outputs": {"table": [10.0, 20.0, 30.0, 40.0], "y": [x]}}), answer
    # Three rows, over --max-batch-size 2: not split either.
    status, answer = _predict(server, {"signature_name": "with_table", "inputs": [1.0, 2.0, 3.0]})
    assert status == 200 and answer["outputs"]["table"] == [10.0, 20.0, 30.0, 40.0], answer
    status, answer = _predict(server, {"signature_name": "with_table", "instances": [1.0, 2.0]})
    assert (
        status == 400 and "Tensor name: table has inconsistent batch size: 4 expecting: 2" in answer["error"]
    )
    # A scalar output killed the batcher: this request and every later one hung.
    status, answer = _predict(server, {"signature_name": "with_scalar", "instances": [1.0, 2.0]})
    assert status == 400 and "Tensor name: count has no shape information" in answer["error"], answer
    assert _predict(server, {"signature_name": "with_scalar", "inputs": [1.0, 2.0]}) == (
        200,
        {"outputs": {"count": 2, "y": [0.5, 1.0]}},
    )
    assert _predict(server, {"instances": [0.0]}) == (200, {"predictions": [2.0]})


def test_nan_and_infinite_outputs_are_written_as_tf_serving_writes_them(server):
    status, answer = server.request(
        "POST",
        "/v1/models/toy:predict",
        raw=json.dumps({"signature_name": "log", "instances": [-1.0, 0.0, 1.0]}).encode(),
    )
    assert status == 200 and answer["predictions"][1:] == [float("-inf"), 0.0], answer  # was a 500
    assert answer["predictions"][0] != answer["predictions"][0]  # NaN
    status, metrics = server.request("GET", "/metrics")
    assert 'kbert_serve_requests_total{code="500",method="predict",model="toy"}' not in metrics


def test_an_error_names_the_clients_example_not_one_within_a_split_part(server):
    # 5 rows in calls of 2: example 3 is example 1 of the second call.
    status, answer = _predict(server, {"signature_name": "lookup", "instances": [0, 1, 2, 9, 3]})
    assert status == 400 and "indices[3] = 9 is not in [0, 4)" in answer["error"], answer


def test_a_request_over_the_queue_is_a_400_naming_the_limit(server):
    # --max-enqueued-batches 3 x --max-batch-size 2: 6 rows; 7 was a 503 "Retry later" forever.
    status, answer = _predict(server, {"instances": [1.0] * 7})
    assert status == 400 and "7 examples; this server takes at most 6 per request" in answer["error"], answer
    assert _predict(server, {"instances": [1.0] * 6})[0] == 200


def test_out_of_range_values_are_400s(server):
    status, answer = _predict(server, {"signature_name": "lookup", "instances": [2147483648]})
    assert status == 400 and "holds 2147483648, outside int32's range" in answer["error"], answer


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (("--batch-timeout-ms", "inf"), "--batch-timeout-ms must be a finite number >= 0"),
        (("--batch-timeout-ms", "nan"), "Received: nan"),
        (("--name", "toy:v2"), "--name must be letters, digits"),
        (("--seq-len", "32"), "--seq-len 32 applies to a run folder"),
        (("--host", "127.0.0.256"), "pass an address of this machine as --host"),
        (("NOSIG",), "has no serving signature"),
    ],
)
def test_start_up_mistakes_are_one_line(export, flags, fragment):
    model = (
        ["--model", str(export / "nosig" / "1")] if flags == ("NOSIG",) else ["--model", str(export), *flags]
    )
    done = subprocess.run(
        [sys.executable, "-m", "keras_bert_impl.cli", "serve", *model, "--port", "0"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    lines = [
        line
        for line in done.stderr.strip().splitlines()
        if not line.startswith(("kbert serve: loading", "kbert serve: toy signature(s)"))
    ]
    assert done.returncode == 2 and len(lines) == 1 and fragment in lines[0], done.stderr[-2000:]


def _rows_computed(server):
    _, metrics = server.request("GET", "/metrics")
    return float(metrics.split("kbert_serve_batch_rows_sum ")[1].split()[0])


def test_a_request_whose_client_left_is_not_computed(server):
    """docs/serving.md: "a request whose client left is dropped, not computed" (it was computed)."""
    before = _rows_computed(server)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        busy = pool.submit(_predict, server, {"signature_name": "busy", "instances": [15000]})
        time.sleep(1.0)  # the busy call holds the only worker
        body = json.dumps({"instances": [1.0, 2.0]}).encode()
        gone = socket.create_connection(("127.0.0.1", server.port))
        gone.sendall(
            b"POST /v1/models/toy:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
            + body
        )
        time.sleep(0.5)  # read and queued behind the busy call
        gone.close()
        status, answer = busy.result(timeout=120)
    assert status == 200 and answer == {"predictions": [15000]}, (status, answer)
    assert _predict(server, {"instances": [0.0]})[0] == 200
    # The busy row and the last request's: the 2 rows of the client that left were never run.
    assert _rows_computed(server) - before == 2, (before, _rows_computed(server))


def test_the_verb_is_read_as_tf_serving_reads_it(server):
    assert _predict(server, {"instances": [1.0]}) == (200, {"predictions": [2.5]})
    assert server.request("POST", "/v1/models/toy:PREDICT", {"instances": [1.0]}) == (
        200,
        {"predictions": [2.5]},
    )
    status, answer = server.request("POST", "/v1/models/toy:foo", {"instances": [1.0]})
    assert status == 400 and answer["error"].startswith("Malformed request: POST /v1/models/toy:foo"), answer
