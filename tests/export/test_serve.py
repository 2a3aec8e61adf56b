"""`kbert serve` through the real entry point in a subprocess, over HTTP on 127.0.0.1: TF
Serving's REST API on the session's MiniLM MR export, answers equal to `kbert predict` and to
the SavedModel's own signature fed the same request bodies, bad requests, slow and vanishing
clients, and SIGTERM under load."""

import concurrent.futures
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.cli import main
from tests.export.conftest import REPO

pytestmark = pytest.mark.slow


def _env():
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    # This checkout's library and wing, whichever is installed (a git worktree's, say).
    return dict(env, PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "export")]))


class Server:
    """`kbert serve ... --port 0` in a subprocess; `port` once it answers."""

    def __init__(self, *flags):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "keras_bert_impl.cli", "serve", *map(str, flags), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        line = (
            self.process.stdout.readline()
        )  # "Serving NAME (version N) at http://127.0.0.1:PORT/v1/models/NAME"
        if not line.startswith("Serving "):
            self.process.kill()
            raise AssertionError(f"kbert serve did not start: {line!r} {self.process.stderr.read()[-3000:]}")
        self.name = line.split()[1]
        self.port = int(line.split("http://127.0.0.1:")[1].split("/")[0])

    def request(self, method, path, body=None, raw=None, timeout=300):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        response = conn.getresponse()
        payload = response.read()
        conn.close()
        text = payload.decode("utf-8")
        return response.status, json.loads(text) if text.startswith("{") else text

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        out, err = self.process.communicate(timeout=120)
        return self.process.returncode, out, err


@pytest.fixture(scope="module")
def server(mr_export):
    serving = Server("--model", mr_export, "--max-batch-size", "16", "--max-body-bytes", "200000")
    yield serving
    status, _, err = serving.stop()
    assert status == 0, err[-3000:]
    assert "no batch dimension" not in err, err[-3000:]  # kbert's exports are batch-major: merged and split


@pytest.fixture(scope="module")
def texts(mr_files):
    return [text for _, text in mr_files["validation_rows"][:48]]


def _bodies(texts):
    """Row-format requests of 1 to 8 texts, the sizes a load test sends."""
    bodies, start, size = [], 0, 1
    while start < len(texts):
        bodies.append({"instances": texts[start : start + size]})
        start, size = start + size, size % 8 + 1
    return bodies


def test_status_and_metadata_are_tf_servings(server):
    assert server.request("GET", f"/v1/models/{server.name}") == (
        200,
        {
            "model_version_status": [
                {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
            ]
        },
    )
    status, metadata = server.request("GET", f"/v1/models/{server.name}/versions/1/metadata")
    assert status == 200 and metadata["model_spec"] == {
        "name": server.name,
        "signature_name": "",
        "version": "1",
    }
    signature = metadata["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert signature["method_name"] == "tensorflow/serving/predict"
    assert signature["inputs"]["text"]["dtype"] == "DT_STRING"
    assert signature["inputs"]["text"]["tensor_shape"] == {
        "dim": [{"size": "-1", "name": ""}],
        "unknown_rank": False,
    }
    assert {"probabilities", "top_label", "top_score"} <= set(signature["outputs"])
    status, ids_metadata = server.request("GET", f"/v1/models/{server.name}_ids/metadata")
    assert sorted(
        ids_metadata["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]
    ) == ["ids", "mask", "segment_ids"]
    assert server.request("GET", "/healthz")[0] == 200


def test_concurrent_answers_equal_kbert_predict_and_the_saved_model(
    server, texts, mr_run, mr_export, tmp_path, capsys
):
    bodies = _bodies(texts)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(lambda body: server.request("POST", f"/v1/models/{server.name}:predict", body), bodies)
        )
    assert all(status == 200 for status, _ in answers), answers[:2]
    predictions = [p for _, answer in answers for p in answer["predictions"]]
    assert len(predictions) == len(texts)

    # kbert predict on the run folder (length buckets, Keras) gives the same labels and scores.
    path = tmp_path / "texts.txt"
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    capsys.readouterr()
    assert main(["predict", "--model", mr_run, "--file", str(path), "--json"]) == 0
    predicted = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [p["top_label"] for p in predictions] == [p["label"] for p in predicted]
    np.testing.assert_allclose(
        [p["top_score"] for p in predictions], [p["probability"] for p in predicted], atol=1e-5
    )

    # The same bodies, as TF Serving feeds them to the SavedModel's signature (row format, one
    # input: the list of instances is the batch of the input the signature names).
    signature = tf.saved_model.load(os.path.join(mr_export, "serving", server.name, "1")).signatures[
        "serving_default"
    ]
    (input_name,) = signature.structured_input_signature[1]
    for body, (_, answer) in zip(bodies, answers):
        direct = signature(**{input_name: tf.constant(body["instances"])})
        np.testing.assert_allclose(
            [p["probabilities"] for p in answer["predictions"]], direct["probabilities"].numpy(), atol=1e-6
        )
        assert [p["top_label"] for p in answer["predictions"]] == [
            b.decode() for b in direct["top_label"].numpy()
        ]

    # Columnar bodies and explicit versions answer the same.
    status, columnar = server.request(
        "POST",
        f"/v1/models/{server.name}/versions/1:predict",
        {"signature_name": "serving_default", "inputs": {"text": texts[:3]}},
    )
    assert status == 200 and columnar["outputs"]["top_label"] == [p["top_label"] for p in predictions[:3]]


def test_bad_requests_get_tf_serving_errors_and_the_server_lives_on(server, texts):
    cases = [
        (f"/v1/models/{server.name}:predict", b"{not json", 400, "JSON Parse error"),
        (
            "/v1/models/nope:predict",
            json.dumps({"instances": ["a"]}).encode(),
            404,
            "Servable not found for request: Latest(nope)",
        ),
        (
            f"/v1/models/{server.name}/versions/7:predict",
            json.dumps({"instances": ["a"]}).encode(),
            404,
            f"Specific({server.name}, 7)",
        ),
        (
            f"/v1/models/{server.name}:predict",
            json.dumps({"signature_name": "x", "instances": ["a"]}).encode(),
            400,
            "not found in signature def",
        ),
        (
            f"/v1/models/{server.name}:predict",
            json.dumps({"instances": [{"sentence": "a"}]}).encode(),
            400,
            "takes ['text']",
        ),
        (
            f"/v1/models/{server.name}:predict",
            json.dumps({"instances": [1, 2]}).encode(),
            400,
            "must be a string",
        ),
        (f"/v1/models/{server.name}:predict", json.dumps({"instances": []}).encode(), 400, "empty list"),
        (
            f"/v1/models/{server.name}:classify",
            json.dumps({"examples": []}).encode(),
            400,
            "predict signatures only",
        ),
        (
            f"/v1/models/{server.name}:predict",
            json.dumps({"instances": ["a gripping , funny film"] * 10000}).encode(),
            413,
            "--max-body-bytes",
        ),
        ("/v1/nothing", b"", 404, "Malformed request"),
    ]
    for path, raw, status, fragment in cases:
        got, answer = server.request("POST", path, raw=raw)
        assert got == status and fragment in answer["error"], (path, got, answer)
    # A 100,000-character text is truncated to the export's length, like any other.
    status, answer = server.request(
        "POST", f"/v1/models/{server.name}:predict", {"instances": ["good " * 20000]}
    )
    assert status == 200 and len(answer["predictions"]) == 1
    # 100 instances in one request: split into batches of --max-batch-size (16).
    status, answer = server.request(
        "POST", f"/v1/models/{server.name}:predict", {"instances": (texts * 3)[:100]}
    )
    assert status == 200 and len(answer["predictions"]) == 100
    status, metrics = server.request("GET", "/monitoring/prometheus/metrics")
    assert (
        status == 200
        and f'kbert_serve_requests_total{{code="413",method="predict",model="{server.name}"}} 1.0' in metrics
    )
    assert server.request("GET", f"/v1/models/{server.name}")[0] == 200


def test_slow_and_vanishing_clients_do_not_stall_the_batcher(server, texts):
    body = json.dumps({"instances": texts[:4]}).encode()
    slow = socket.create_connection(("127.0.0.1", server.port))
    slow.sendall(
        b"POST /v1/models/%s:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % (server.name.encode(), len(body)) + body[:10]
    )  # and then nothing more
    for _ in range(3):  # clients that send a request and leave before the answer
        gone = socket.create_connection(("127.0.0.1", server.port))
        gone.sendall(
            b"POST /v1/models/%s:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
            % (server.name.encode(), len(body))
            + body
        )
        gone.close()
    started = time.monotonic()
    status, answer = server.request("POST", f"/v1/models/{server.name}:predict", raw=body)
    assert status == 200 and len(answer["predictions"]) == 4
    assert time.monotonic() - started < 10
    slow.sendall(body[10:])  # the slow client finishes and is answered too
    assert b"200 OK" in slow.recv(65536)
    slow.close()


def test_the_client_example_runs_against_it(server, texts):
    done = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "export", "tf_serving_client.py"),
            "--url",
            f"http://127.0.0.1:{server.port}",
            "--model",
            server.name,
            *texts[:3],
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    _, answer = server.request("POST", f"/v1/models/{server.name}:predict", {"instances": texts[:3]})
    assert [line.split("\t")[0] for line in done.stdout.splitlines()] == [
        p["top_label"] for p in answer["predictions"]
    ]


def test_sigterm_under_load_answers_every_accepted_request_then_exits_0(mr_export, texts):
    serving = Server("--model", mr_export)
    results, stop = [], threading.Event()

    def client(i):
        body = {"instances": texts[i : i + 1 + i % 8]}
        while not stop.is_set():
            try:
                status, _ = serving.request("POST", f"/v1/models/{serving.name}:predict", body, timeout=120)
                results.append(status)
            except ConnectionRefusedError:
                results.append("refused")
                return
            except Exception as e:  # a reset or a lost answer: what this test is here to catch
                results.append(type(e).__name__)
                return

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(3)
    status, _, err = serving.stop()
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert status == 0, err[-3000:]
    answered = results.count(200)
    assert answered > 0 and set(results) <= {200, "refused"}, results
    # What the server read, it answered, and every answer reached its client.
    assert f"{answered} predict requests accepted, {answered} answered" in err, (answered, err[-500:])
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", serving.port), timeout=5)


def test_a_run_folder_is_served_as_its_export(server, mr_run, texts):
    serving = Server("--model", mr_run, "--name", "from_run")
    try:
        assert serving.name == "from_run"
        body = {"instances": texts[:5]}
        status, answer = serving.request("POST", "/v1/models/from_run:predict", body)
        _, expected = server.request("POST", f"/v1/models/{server.name}:predict", body)
        assert status == 200
        assert [p["top_label"] for p in answer["predictions"]] == [
            p["top_label"] for p in expected["predictions"]
        ]
        np.testing.assert_allclose(
            [p["probabilities"] for p in answer["predictions"]],
            [p["probabilities"] for p in expected["predictions"]],
            atol=1e-6,
        )
    finally:
        assert serving.stop()[0] == 0


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (("--model", "/no/such/export"), "--model '/no/such/export': no such file or folder"),
        (("--model", REPO + "/tests"), "holds no SavedModel"),
        (
            ("--model", REPO + "/tests", "--max-batch-size", "0"),
            "--max-batch-size must be a positive integer. Received: 0",
        ),
    ],
)
def test_start_up_errors_are_one_line(flags, fragment):
    done = subprocess.run(
        [sys.executable, "-m", "keras_bert_impl.cli", "serve", *flags, "--port", "0"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and fragment in lines[0], done.stderr[-2000:]
