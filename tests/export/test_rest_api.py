"""TF Serving's REST bodies (rest_api) and the dynamic batcher, without a server."""

import asyncio
import json
import threading

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_lite.serve.dynamic_batcher import (
    DynamicBatcher,
    QueueFullError,
    RequestTooLargeError,
    UnbatchableOutputError,
)
from keras_bert_lite.serve.model_server import client_error_message
from keras_bert_lite.serve.rest_api import RestApiError, format_predict_response, parse_predict_body

TEXT = {"serving_default": {"inputs": {"text": tf.TensorSpec([None], tf.string, "text")}}}
PAIR = {
    "serving_default": {
        "inputs": {
            "text": tf.TensorSpec([None], tf.string, "text"),
            "text_b": tf.TensorSpec([None], tf.string, "text_b"),
        }
    }
}
IDS = {
    "serving_default": {
        "inputs": {
            name: tf.TensorSpec([None, None], tf.int32, name) for name in ("ids", "mask", "segment_ids")
        }
    }
}


def _parse(body, signatures=TEXT):
    return parse_predict_body(json.dumps(body).encode(), signatures)


def test_row_and_columnar_bodies_give_the_same_arrays():
    for body in (
        {"instances": ["a", "b"]},
        {"instances": [{"text": "a"}, {"text": "b"}]},
        {"inputs": ["a", "b"]},
        {"inputs": {"text": ["a", "b"]}},
    ):
        signature, arrays, rows, _ = _parse(body)
        assert (signature, rows) == ("serving_default", 2)
        assert list(arrays["text"]) == [b"a", b"b"], body
    _, arrays, rows, row_format = _parse({"instances": [{"text": "q", "text_b": "c"}]}, PAIR)
    assert rows == 1 and row_format and arrays["text_b"][0] == b"c"
    _, arrays, rows, _ = _parse(
        {"inputs": {"ids": [[101, 7, 102]], "mask": [[1, 1, 1]], "segment_ids": [[0, 0, 0]]}}, IDS
    )
    assert arrays["ids"].dtype == np.int32 and arrays["ids"].shape == (1, 3)


def test_responses_follow_tf_serving():
    outputs = {"probabilities": np.array([[0.25, 0.75]], np.float32), "top_label": np.array([b"pos"], object)}
    assert format_predict_response(outputs, row_format=True) == {
        "predictions": [{"probabilities": [0.25, 0.75], "top_label": "pos"}]
    }
    assert format_predict_response(outputs, row_format=False) == {
        "outputs": {"probabilities": [[0.25, 0.75]], "top_label": ["pos"]}
    }
    # One output: no names (TF Serving's rule).
    assert format_predict_response({"embeddings": np.array([[1.0], [2.0]], np.float32)}, True) == {
        "predictions": [[1.0], [2.0]]
    }
    assert format_predict_response({"raw_bytes": np.array([b"\xff"], object)}, False) == {
        "outputs": [{"b64": "/w=="}]
    }


@pytest.mark.parametrize(
    "body, fragment",
    [
        (b"{not json", "JSON Parse error"),
        (b"[1, 2]", "must be a JSON object"),
        ({"instances": []}, "'instances' is an empty list"),
        ({"instances": "a text"}, "'instances' must be a list"),
        ({"instances": ["a"], "inputs": ["a"]}, "exactly one of them"),
        ({}, "Missing 'inputs' or 'instances'"),
        ({"instances": ["a"], "signature_name": "classify"}, 'signature name: "classify" not found'),
        ({"instances": [3]}, "instances[0] of input 'text' must be a string"),
        ({"instances": ["a", None]}, "instances[1] of input 'text' must be a string"),
        ({"instances": [{"txt": "a"}]}, "has the keys ['txt']"),
        ({"inputs": {"txt": ["a"]}}, "'inputs' has the keys ['txt']"),
        ({"instances": [["a"]]}, "must be a string"),
        ({"instances": ["a"], "output_filter": ["x"]}, "Unknown key(s) ['output_filter']"),
        # Valid JSON, but no text: a lone surrogate escape (it was a 500, UnicodeEncodeError).
        (
            b'{"instances": ["ok", "bad \\ud800 text"]}',
            "instances[1] of input 'text' holds '\\ud800' at character 4, a lone UTF-16 surrogate",
        ),
    ],
)
def test_bad_bodies_are_400_with_a_reason(body, fragment):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(RestApiError) as error:
        parse_predict_body(raw, TEXT)
    assert error.value.status == 400 and fragment in str(error.value), str(error.value)


def test_bad_pair_and_id_bodies():
    with pytest.raises(RestApiError, match="object with the inputs"):
        _parse({"instances": ["a"]}, PAIR)
    with pytest.raises(RestApiError, match="different numbers of examples"):
        _parse({"inputs": {"text": ["a", "b"], "text_b": ["c"]}}, PAIR)
    with pytest.raises(RestApiError, match="different lengths"):
        _parse({"inputs": {"ids": [[1, 2], [1]], "mask": [[1, 1], [1]], "segment_ids": [[0, 0], [0]]}}, IDS)
    with pytest.raises(RestApiError, match="must be an integer"):
        _parse({"inputs": {"ids": [[1.5]], "mask": [[1]], "segment_ids": [[0]]}}, IDS)
    with pytest.raises(RestApiError, match="must be a number"):
        _parse({"inputs": {"ids": [[True]], "mask": [[1]], "segment_ids": [[0]]}}, IDS)


class _Recorder:
    """A model that doubles its input and records each call's batch size."""

    def __init__(self, delay=0.0):
        self.sizes, self.delay, self.event = [], delay, threading.Event()

    def __call__(self, key, inputs):
        self.sizes.append(len(inputs["x"]))
        if self.delay:
            self.event.wait(self.delay)
        return {"y": inputs["x"] * 2}


def _submit_all(batcher, requests):
    async def main():
        await batcher.start()
        try:
            return await asyncio.gather(*(batcher.submit("k", {"x": x}, len(x)) for x in requests))
        finally:
            await batcher.stop()

    return asyncio.run(main())


def test_concurrent_requests_share_calls_and_keep_their_rows():
    model = _Recorder()
    requests = [np.arange(i, i + 1 + i % 3, dtype=np.float32) for i in range(40)]  # 1-3 rows each
    results = _submit_all(DynamicBatcher(model, max_batch_size=8, batch_timeout_ms=50), requests)
    for x, result in zip(requests, results):
        np.testing.assert_array_equal(result["y"], x * 2)
    assert sum(model.sizes) == sum(len(x) for x in requests)
    assert max(model.sizes) <= 8 and len(model.sizes) < len(requests) / 2, model.sizes


def test_a_large_request_is_split_into_batches():
    model = _Recorder()
    x = np.arange(100, dtype=np.float32)
    (result,) = _submit_all(DynamicBatcher(model, max_batch_size=32, batch_timeout_ms=0), [x])
    np.testing.assert_array_equal(result["y"], x * 2)
    assert model.sizes == [32, 32, 32, 4]


def test_a_full_queue_refuses_at_once_and_a_gone_client_costs_nothing():
    model = _Recorder(delay=0.3)

    async def main():
        batcher = DynamicBatcher(model, max_batch_size=4, batch_timeout_ms=0, max_enqueued_batches=2)
        await batcher.start()
        first = asyncio.create_task(batcher.submit("k", {"x": np.ones(4, np.float32)}, 4))
        await asyncio.sleep(0.05)  # the first batch runs; the queue is empty again
        gone = asyncio.create_task(batcher.submit("k", {"x": np.ones(4, np.float32)}, 4))
        kept = asyncio.create_task(batcher.submit("k", {"x": np.ones(4, np.float32)}, 4))
        await asyncio.sleep(0.01)
        with pytest.raises(QueueFullError, match="would pass its 8"):
            await batcher.submit("k", {"x": np.ones(1, np.float32)}, 1)
        gone.cancel()  # its client disconnected while it waited
        await asyncio.sleep(0)
        # Its rows are free at once, not when a worker next reaches it: a new request fits.
        late = asyncio.create_task(batcher.submit("k", {"x": np.ones(4, np.float32)}, 4))
        await first
        await kept
        await late
        await batcher.stop()

    asyncio.run(main())
    assert model.sizes == [4, 4, 4]  # the cancelled request was never computed


def test_the_parts_a_failed_request_never_runs_leave_the_queue_at_once():
    # 5 rows in parts of 2; the second part fails, so the third is cancelled. It once held its
    # row in the queue until the batch timeout passed, and a full-size request just after got
    # a 503 (the CI failure of tests/export/test_serve_toy.py).
    def model(key, inputs):
        if (inputs["x"] < 0).any():
            raise tf.errors.InvalidArgumentError(None, None, "indices[1] = -1 is not in [0, 4)")
        return {"y": inputs["x"]}

    async def main():
        batcher = DynamicBatcher(model, max_batch_size=2, batch_timeout_ms=5000, max_enqueued_batches=3)
        await batcher.start()
        try:
            with pytest.raises(tf.errors.InvalidArgumentError):
                await batcher.submit("k", {"x": np.array([0, 1, -1, 2, 3], np.float32)}, 5)
            await asyncio.sleep(0)
            assert batcher.queued_rows == 0
            return await asyncio.wait_for(batcher.submit("k", {"x": np.ones(6, np.float32)}, 6), 10)
        finally:
            await batcher.stop()

    np.testing.assert_array_equal(asyncio.run(main())["y"], np.ones(6, np.float32))


def test_a_request_that_makes_the_model_raise_fails_alone():
    def model(key, inputs):  # raises like a gather given an id past the vocabulary
        if (inputs["x"] < 0).any():
            raise tf.errors.InvalidArgumentError(None, None, "indices[1] = -1 is not in [0, 30522)")
        calls.append(len(inputs["x"]))
        return {"y": inputs["x"] * 2}

    calls = []
    requests = [np.arange(i, i + 2, dtype=np.float32) for i in range(6)]
    requests[3] = np.array([5.0, -1.0], np.float32)

    async def main():
        batcher = DynamicBatcher(model, max_batch_size=16, batch_timeout_ms=100)
        await batcher.start()
        try:
            return await asyncio.gather(
                *(batcher.submit("k", {"x": x}, len(x)) for x in requests), return_exceptions=True
            )
        finally:
            await batcher.stop()

    results = asyncio.run(main())
    assert isinstance(results[3], tf.errors.InvalidArgumentError), results[3]
    for i, (x, result) in enumerate(zip(requests, results)):
        if i != 3:
            np.testing.assert_array_equal(result["y"], x * 2)
    assert calls == [2] * 5  # the merged call failed; each good request then ran alone


def test_bad_batcher_settings_are_named():
    with pytest.raises(ValueError, match="max_batch_size"):
        DynamicBatcher(lambda k, x: x, max_batch_size=0)
    with pytest.raises(ValueError, match="batch_timeout_ms"):
        DynamicBatcher(lambda k, x: x, batch_timeout_ms=-1)
    with pytest.raises(ValueError, match="finite number >= 0"):
        DynamicBatcher(lambda k, x: x, batch_timeout_ms=float("inf"))
    with pytest.raises(ValueError, match="finite number >= 0"):
        DynamicBatcher(lambda k, x: x, batch_timeout_ms=float("nan"))


def _run_batcher(batcher, *requests, timeout=20):
    """Submits (inputs, rows, whole) requests concurrently; their results or errors, in order.
    A hung batcher fails the test at `timeout` rather than hanging it."""

    async def main():
        await batcher.start()
        try:
            return await asyncio.wait_for(
                asyncio.gather(
                    *(batcher.submit("k", {"x": x}, len(x), whole=whole) for x, whole in requests),
                    return_exceptions=True,
                ),
                timeout,
            )
        finally:
            await asyncio.wait_for(batcher.stop(), timeout)

    return asyncio.run(main())


def _with_table(key, inputs):
    """Like a SavedModel with an output of no batch dimension: a constant table, a scalar."""
    return {
        "y": inputs["x"] * 2,
        "table": np.array([10.0, 20.0, 30.0, 40.0]),
        "count": np.array(len(inputs["x"])),
    }


def test_outputs_without_a_batch_dimension_are_never_cut_between_requests():
    one, two = np.array([1.0], np.float32), np.array([2.0, 3.0], np.float32)
    # Submitted whole (the server does so for such a signature): each request alone, outputs as given.
    calls = []
    model = lambda key, inputs: calls.append(len(inputs["x"])) or _with_table(key, inputs)  # noqa: E731
    first, second = _run_batcher(
        DynamicBatcher(model, max_batch_size=2, batch_timeout_ms=100), (one, True), (two, True)
    )
    assert sorted(calls) == [1, 2]  # not merged, and the 2 rows not split
    np.testing.assert_array_equal(first["table"], [10.0, 20.0, 30.0, 40.0])
    np.testing.assert_array_equal(second["table"], [10.0, 20.0, 30.0, 40.0])
    assert int(first["count"]) == 1 and int(second["count"]) == 2
    # Submitted to be merged, such outputs are refused (they were sliced, one table entry per
    # client, and a scalar killed the worker: every later request hung).
    batcher = DynamicBatcher(_with_table, max_batch_size=4, batch_timeout_ms=100)
    results = _run_batcher(batcher, (one, False), (two, False))
    for result in results:
        assert isinstance(result, UnbatchableOutputError), result
        assert "has shape [4], not one entry per example" in str(result) or "has shape []" in str(result)


def test_a_failing_worker_answers_its_requests_and_keeps_working():
    def on_batch(rows, seconds):  # a bug after the call: it raised in the worker, which died
        if rows == 3:
            raise RuntimeError("metrics broke")

    batcher = DynamicBatcher(
        lambda key, inputs: {"y": inputs["x"]}, max_batch_size=8, batch_timeout_ms=0, on_batch=on_batch
    )

    async def main():
        await batcher.start()
        try:
            with pytest.raises(RuntimeError, match="metrics broke"):
                await asyncio.wait_for(batcher.submit("k", {"x": np.ones(3, np.float32)}, 3), 10)
            return await asyncio.wait_for(batcher.submit("k", {"x": np.ones(2, np.float32)}, 2), 10)
        finally:
            await asyncio.wait_for(batcher.stop(), 10)

    np.testing.assert_array_equal(asyncio.run(main())["y"], [1.0, 1.0])


def test_a_request_larger_than_the_queue_is_refused_as_too_large_not_retryable():
    batcher = DynamicBatcher(lambda key, inputs: {"y": inputs["x"]}, max_batch_size=4, max_enqueued_batches=2)
    (result,) = _run_batcher(batcher, (np.ones(9, np.float32), False))
    assert isinstance(result, RequestTooLargeError) and not isinstance(result, QueueFullError), result
    assert "9 examples; this server takes at most 8 per request" in str(
        result
    ) and "--max-enqueued-batches" in str(result)
    (result,) = _run_batcher(
        DynamicBatcher(lambda key, inputs: {"y": inputs["x"]}, max_batch_size=4, max_enqueued_batches=2),
        (np.ones(8, np.float32), False),
    )
    np.testing.assert_array_equal(result["y"], np.ones(8))


def test_an_error_in_a_split_part_says_where_the_part_starts():
    def model(key, inputs):
        bad = np.flatnonzero(inputs["x"] < 0)
        if bad.size:
            raise tf.errors.InvalidArgumentError(None, None, f"indices[{bad[0]},1] = -1 is not in [0, 30522)")
        return {"y": inputs["x"]}

    x = np.arange(40, dtype=np.float32)
    x[35] = -1
    (result,) = _run_batcher(DynamicBatcher(model, max_batch_size=32, batch_timeout_ms=0), (x, False))
    assert isinstance(result, tf.errors.InvalidArgumentError) and result.first_row == 32, result


TOY = {
    "serving_default": {
        "inputs": {
            "flag": tf.TensorSpec([None], tf.bool, "flag"),
            "x": tf.TensorSpec([None], tf.float32, "x"),
        }
    }
}


@pytest.mark.parametrize(
    "body, signatures, fragment",
    [
        # They were 500s: OverflowError from numpy, RecursionError from json.
        (
            {"inputs": {"ids": [[2147483648]], "mask": [[1]], "segment_ids": [[0]]}},
            IDS,
            "inputs[0][0] of input 'ids' holds 2147483648, outside int32's range [-2147483648, 2147483647]",
        ),
        (
            {"inputs": {"ids": [[1e10]], "mask": [[1]], "segment_ids": [[0]]}},
            IDS,
            "holds 10000000000.0, outside int32's range",
        ),
        (
            {"inputs": {"ids": [[-2147483649]], "mask": [[1]], "segment_ids": [[0]]}},
            IDS,
            "outside int32's range",
        ),
        (b'{"instances": ' + b"[" * 100000 + b"]" * 100000 + b"}", TEXT, "nests lists or objects too deeply"),
        ({"inputs": {"flag": [True], "x": [1e300]}}, TOY, "holds 1e+300, beyond float32's largest value"),
        ({"inputs": {"flag": [1], "x": [1.0]}}, TOY, "input 'flag' must be true or false (bool); received 1"),
    ],
)
def test_values_the_input_type_cannot_hold_are_400s(body, signatures, fragment):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(RestApiError) as error:
        parse_predict_body(raw, signatures)
    assert error.value.status == 400 and fragment in str(error.value), str(error.value)


def test_bool_and_b64_inputs_follow_tf_serving():
    _, arrays, _, _ = _parse({"inputs": {"flag": [True, False], "x": [1.0, float("nan")]}}, TOY)
    assert arrays["flag"].tolist() == [True, False] and np.isnan(arrays["x"][1])
    _, arrays, _, _ = _parse({"instances": [{"b64": "/w=="}, "ok"]})  # any string input takes b64
    assert list(arrays["text"]) == [b"\xff", b"ok"]


def test_outputs_without_one_value_per_example_in_the_row_format():
    outputs = {"y": np.array([1.0, 2.0], np.float32), "table": np.array([10.0, 20.0, 30.0, 40.0], np.float32)}
    with pytest.raises(RestApiError, match="Tensor name: table has inconsistent batch size: 4 expecting: 2"):
        format_predict_response(outputs, row_format=True, rows=2)
    with pytest.raises(RestApiError, match="Tensor name: count has no shape information"):
        format_predict_response({"count": np.array(2)}, row_format=True, rows=2)
    # Columnar: each output whole (TF Serving's MakeColumnarJsonFromTensors).
    assert format_predict_response(outputs, row_format=False, rows=2) == {
        "outputs": {"table": [10.0, 20.0, 30.0, 40.0], "y": [1.0, 2.0]}
    }


def test_float32_outputs_are_written_as_tf_serving_writes_them():
    """TF Serving's WriteDecimal: "%g" when it reads back as the same float32, else "%.9g"
    (api_rest.md's answers: 2.05 for half_plus_two(0.1), not 2.049999952316284)."""
    outputs = {"y": np.array([2.05, 0.49962282180786133, 1e-8, 3.0, np.nan, -np.inf], np.float32)}
    text = json.dumps(format_predict_response(outputs, row_format=False))
    assert text == '{"outputs": [2.05, 0.499622822, 1e-08, 3.0, NaN, -Infinity]}', text
    assert format_predict_response({"z": np.array([[0.25]], np.float32)}, True) == {"predictions": [[0.25]]}


def test_a_graph_assertion_reaches_the_client_as_its_message_in_the_client_rows():
    """The export's id check is an Assert in the SavedModel's graph: the client hears its message,
    not TensorFlow's 'Graph execution error ... Detected at node' wrapping, with the example
    counted in its own request."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def check(x):
        with tf.control_dependencies(
            [tf.debugging.Assert(tf.reduce_all(x >= 0), ["Input ids holds -1 at example 3, position 0: no."])]
        ):
            return tf.identity(x)

    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        check(tf.constant([1, -1]))
    assert "Detected at node" in str(error.value)  # what the client was shown before
    assert client_error_message(error.value, 0) == "Input ids holds -1 at example 3, position 0: no."
    assert client_error_message(error.value, 32) == "Input ids holds -1 at example 35, position 0: no."


def test_a_request_that_comes_alone_runs_at_once_and_concurrent_ones_wait_to_merge():
    """One client at a time pays no batch timeout (it added 2 ms to every kept-alive request of
    `kbert serve`); once requests come together, a batch waits its timeout for more rows."""
    import time

    model = _Recorder()

    async def main():
        batcher = DynamicBatcher(model, max_batch_size=8, batch_timeout_ms=2000)
        await batcher.start()
        try:
            started = time.monotonic()
            await batcher.submit("k", {"x": np.ones(1, np.float32)}, 1)
            alone = time.monotonic() - started
            await asyncio.gather(*(batcher.submit("k", {"x": np.ones(1, np.float32)}, 1) for _ in range(3)))
            started = time.monotonic()
            await batcher.submit("k", {"x": np.ones(1, np.float32)}, 1)
            after_merging = time.monotonic() - started
        finally:
            await batcher.stop()
        return alone, after_merging

    alone, after_merging = asyncio.run(main())
    assert alone < 1.0, alone
    assert model.sizes == [1, 3, 1], model.sizes
    assert after_merging >= 1.9, after_merging


def test_a_lone_request_to_a_quick_key_runs_on_the_loops_thread_and_a_slow_keys_in_a_worker():
    """run_now saves a one-client request the two thread hand-offs around its call; a key whose
    last call took longer than INLINE_MAX_S (or was never called) keeps its calls off the loop."""
    from keras_bert_lite.serve.dynamic_batcher import INLINE_MAX_S

    threads = []

    def model(key, inputs):
        threads.append(threading.current_thread().name)
        if key == "slow":
            threading.Event().wait(INLINE_MAX_S * 1.5)
        return {"y": inputs["x"] * 2}

    one = {"x": np.ones(1, np.float32)}

    async def main():
        batcher = DynamicBatcher(model, max_batch_size=8, batch_timeout_ms=0)
        await batcher.start()
        try:
            said = [batcher.runs_now("quick", 1)]  # never called: no estimate yet
            await batcher.submit("quick", one, 1)
            said.append(batcher.runs_now("quick", 1))
            np.testing.assert_array_equal(batcher.run_now("quick", one, 1)["y"], [2.0])
            # A request of many more rows scales the last call's time: 0.05 s would not stay under.
            said.append(batcher.runs_now("quick", 10**6))
            await batcher.submit("slow", one, 1)
            said.append(batcher.runs_now("slow", 1))
            with pytest.raises(UnbatchableOutputError):  # checked as a worker's call is
                DynamicBatcher(lambda key, inputs: {"y": np.float32(1)}).run_now("k", one, 1)
        finally:
            await batcher.stop()
        return said

    assert asyncio.run(main()) == [False, True, False, False]
    assert threads[0].startswith("batch") and threads[2].startswith("batch"), threads
    assert threads[1] == threading.main_thread().name, threads


def test_a_client_that_left_is_seen_before_an_inline_call_and_one_still_there_is_not_waited_for():
    from keras_bert_lite.serve.model_server import _gone_already

    async def left():
        return {"type": "http.disconnect"}

    waiting = []

    async def still_there():
        waiting.append(asyncio.current_task())
        await asyncio.Event().wait()

    async def main():
        gone, there = await _gone_already(left), await _gone_already(still_there)
        await asyncio.sleep(0)
        return gone, there, waiting[0].cancelled()

    assert asyncio.run(main()) == (True, False, True)
