"""Concurrent requests merged into one model call, with TF Serving's batching parameters.

TF Serving's batching (`--enable_batching`, its batching_parameters file) is the model:
`max_batch_size` rows per call, `batch_timeout_micros` (here milliseconds) that the first
request of a batch waits for others, `num_batch_threads` calls at once, a bounded queue
(`max_enqueued_batches`) whose overflow is refused at once (TF Serving: UNAVAILABLE) rather than
waited on, and large requests split into batches of `max_batch_size` rows
(`enable_large_batch_splitting`). Requests are merged only when they go to the same signature
with the same per-example shapes (the key, a `BatchKey` in the server); the model runs in
worker threads, so the event loop keeps reading requests (a slow client never holds a batch
back: its request joins the queue only once its body has arrived), and an answer nobody waits
for any more (the client left) is dropped, not computed. Unlike TF Serving, whose batch fails as a whole, a
merged call that fails is run again request by request, so only the request that makes the
model raise hears the error. A request submitted `whole` (a signature with an output that has
no batch dimension: a scalar, a constant table) runs alone and unsplit, and its outputs come
back as the model gave them: slicing them would hand one client's part of a tensor to another.
A request that comes alone to a key whose calls are quick runs on the event loop's own thread
(`run_now`): handing it to a worker thread and its answer back costs two thread wake-ups, a good
part of a one-client request's time around a few-millisecond forward; a slow key's calls stay in
the workers, so the loop keeps answering health checks and reading requests meanwhile.
"""

import asyncio
import collections
import concurrent.futures
import math
import time

import numpy as np

from keras_bert_lite.checks import positive_int


# How long a merged call (or two requests queued at once) keeps the batcher waiting for rows.
CONCURRENCY_MEMORY_S = 1.0
# The longest call `run_now` makes on the event loop's thread (estimated from the key's last call):
# while it runs, the loop reads no request and answers no health check.
INLINE_MAX_S = 0.05


class QueueFullError(Exception):
    """The queue holds max_enqueued_batches * max_batch_size rows already."""


class RequestTooLargeError(ValueError):
    """One request has more rows than the whole queue holds: it could never be queued."""


class UnbatchableOutputError(Exception):
    """The model gave an output without one entry per row of a merged or split call."""


class _Item:
    __slots__ = ("key", "inputs", "rows", "future", "enqueued", "whole")

    def __init__(self, key, inputs, rows, future, whole=False):
        self.key, self.inputs, self.rows, self.future, self.whole = key, inputs, rows, future, whole
        self.enqueued = time.monotonic()


class DynamicBatcher:
    """Merges `submit`ted requests into calls of `run(key, inputs)`.

    Args:
        run: callable(key, {name: numpy [B, ...]}) -> {name: numpy [B, ...]}, called in a
            worker thread with the key the requests were submitted under (any hashable;
            the server's is a BatchKey); B is at most max_batch_size.
        max_batch_size: int >= 1. Rows per call.
        batch_timeout_ms: float >= 0. How long a batch that is not full waits for more rows,
            while requests come together (two or more queued at once, or merged into one call in
            the last `CONCURRENCY_MEMORY_S` seconds). A request that comes alone runs at once:
            waiting for rows nobody is sending only adds the timeout to its latency.
        num_batch_threads: int >= 1. Calls running at once.
        max_enqueued_batches: int >= 1. The queue holds at most this many full batches of rows;
            a request beyond that is refused (QueueFullError), and one request with more rows
            than that on its own is refused as too large (RequestTooLargeError, a ValueError).
        on_batch: callable(rows, seconds) or None, told of every call (metrics).

    Use it from one asyncio event loop: `await start()`, `await submit(...)`, `await stop()`.
    """

    def __init__(
        self,
        run,
        max_batch_size=32,
        batch_timeout_ms=2.0,
        num_batch_threads=1,
        max_enqueued_batches=1000,
        on_batch=None,
    ):
        self._run = run
        self.max_batch_size = positive_int("max_batch_size", max_batch_size)
        # inf never ends a batch that is not full (its requests hang); NaN compares false to every deadline.
        if (
            isinstance(batch_timeout_ms, bool)
            or not isinstance(batch_timeout_ms, (int, float))
            or not 0 <= batch_timeout_ms < math.inf
        ):
            raise ValueError(
                "batch_timeout_ms must be a finite number >= 0. Received: "
                f"batch_timeout_ms={batch_timeout_ms!r}"
            )
        self.batch_timeout = batch_timeout_ms / 1000.0
        self.num_batch_threads = positive_int("num_batch_threads", num_batch_threads)
        self.max_enqueued_rows = (
            positive_int("max_enqueued_batches", max_enqueued_batches) * self.max_batch_size
        )
        self._on_batch = on_batch
        self._queue = collections.deque()
        self.queued_rows = 0
        self._wakeup = None
        self._workers = []
        self._executor = None
        self._stopping = False
        self._calls = 0  # calls running now
        self._last_call = {}  # key -> (rows, seconds) of its last call
        self._came_together = -math.inf  # when requests last came together (time.monotonic())

    async def start(self):
        self._wakeup = asyncio.Event()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self.num_batch_threads, thread_name_prefix="batch"
        )
        self._workers = [asyncio.create_task(self._work()) for _ in range(self.num_batch_threads)]

    async def stop(self):
        """Answers everything queued, then stops the workers."""
        self._stopping = True
        self._wakeup.set()
        await asyncio.gather(*self._workers)
        self._executor.shutdown(wait=True)

    def starts_at_once(self, rows, whole=False):
        """Whether a request of `rows` submitted now starts computing at once, as one call: nothing
        queued, a thread free, no part to wait behind another, and requests not coming together
        (when they do, a lone request waits for others). Such a request has no time in the
        queue in which its client could leave."""
        return (
            not self._queue
            and self._calls < self.num_batch_threads
            and (whole or rows <= self.max_batch_size)
            and time.monotonic() - self._came_together > CONCURRENCY_MEMORY_S
        )

    def runs_now(self, key, rows, whole=False):
        """Whether a request of `rows` under `key` is one for `run_now`: it starts at once, and the
        key's last call, scaled to `rows`, took at most INLINE_MAX_S (a key not yet called is not)."""
        last = self._last_call.get(key)
        return (
            last is not None
            and last[1] * max(1.0, rows / last[0]) <= INLINE_MAX_S
            and self.starts_at_once(rows, whole)
        )

    def run_now(self, key, inputs, rows, whole=False):
        """submit's answer computed here, on the caller's (the event loop's) thread, as one call:
        for a request `runs_now` says yes to. Errors are raised as submit raises them."""
        self._calls += 1
        started = time.monotonic()
        try:
            outputs = self._run(key, inputs)
        finally:
            self._calls -= 1
        if not whole:
            _check_batch_major(outputs, rows)
        self._called(key, rows, time.monotonic() - started)
        return outputs

    def _called(self, key, rows, seconds):
        self._last_call[key] = (rows, seconds)
        if self._on_batch is not None:
            self._on_batch(rows, seconds)

    async def submit(self, key, inputs, rows, whole=False):
        """{name: numpy [rows, ...]} -> {name: numpy [rows, ...]}, computed in batches.

        whole: run the request alone and unsplit, and return the outputs as the model gave them
        (for outputs without a batch dimension)."""
        if self._stopping:
            raise QueueFullError("the server is shutting down")
        if rows > self.max_enqueued_rows:
            raise RequestTooLargeError(
                f"The request has {rows} examples; this server takes at most {self.max_enqueued_rows} per "
                "request (--max-enqueued-batches x --max-batch-size): send at most that many per request, "
                "or start the server with a larger --max-enqueued-batches."
            )
        if self.queued_rows + rows > self.max_enqueued_rows:
            raise QueueFullError(
                f"the batch queue holds {self.queued_rows} rows; {rows} more would pass its "
                f"{self.max_enqueued_rows} (max_enqueued_batches x max_batch_size)"
            )
        loop = asyncio.get_running_loop()
        size = rows if whole else self.max_batch_size
        futures = []
        for start in range(0, rows, size):
            part = {name: value[start : start + size] for name, value in inputs.items()}
            count = min(size, rows - start)
            item = _Item(key, part, count, loop.create_future(), whole=whole)
            # A part cancelled while queued (its client left, or another part failed) gives its
            # rows back at once: the queue bound counts only rows that will still run.
            item.future.add_done_callback(lambda future, item=item: self._drop_if_queued(item))
            futures.append(item.future)
            self._queue.append(item)
            self.queued_rows += count
        self._wakeup.set()
        if len(futures) == 1:
            return await futures[0]
        parts = await self._gather(futures, size)
        return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}

    @staticmethod
    async def _gather(futures, size):
        """The parts' outputs; a part's error carries the row its part starts at (`first_row`),
        so the server can name the client's example rather than one counted within the part."""
        parts = []
        for index, future in enumerate(futures):
            try:
                parts.append(await future)
            except asyncio.CancelledError:  # the client left: none of its parts is computed
                for other in futures:
                    other.cancel()
                raise
            except Exception as e:
                e.first_row = index * size
                for other in futures[index + 1 :]:
                    other.cancel()  # nobody waits for the remaining parts any more
                raise
        return parts

    def _rows_for(self, key):
        return sum(item.rows for item in self._queue if item.key == key)

    def _drop_if_queued(self, item):
        if item.future.cancelled() and item in self._queue:
            self._queue.remove(item)
            self.queued_rows -= item.rows

    def _take(self, key):
        """The oldest items of `key` that fit one batch, removed from the queue."""
        batch, rows, kept = [], 0, collections.deque()
        while self._queue:
            item = self._queue.popleft()
            if item.future.done():  # cancelled, its callback not yet run: whoever dequeues it counts it
                self.queued_rows -= item.rows
            elif (
                item.key == key
                and not (batch and (batch[0].whole or item.whole))
                and (not batch or rows + item.rows <= self.max_batch_size)
            ):
                batch.append(item)
                rows += item.rows
                self.queued_rows -= item.rows
            else:
                kept.append(item)
        self._queue = kept
        return batch

    async def _work(self):
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                if self._stopping:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            key = self._queue[0].key
            await self._wait_for_rows(key)
            batch = self._take(key)
            if not batch:
                continue
            if len(batch) > 1:
                self._came_together = time.monotonic()
            try:
                await self._answer(loop, key, batch)
            except Exception as e:  # a bug of ours must not stop this worker: its requests hear it
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(e)

    async def _wait_for_rows(self, key):
        """Waits until the oldest request's batch is full or its timeout passed, while requests
        come together; returns at once for a whole request or one that came alone."""
        deadline = self._queue[0].enqueued + self.batch_timeout
        if len(self._queue) > 1:
            self._came_together = time.monotonic()
        if self._queue[0].whole or time.monotonic() - self._came_together > CONCURRENCY_MEMORY_S:
            return
        while self._rows_for(key) < self.max_batch_size and not self._stopping:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except asyncio.TimeoutError:
                return

    async def _answer(self, loop, key, batch):
        """Runs `batch` as one call and answers its items.

        When the merged call fails and it held more than one request, each request runs alone,
        so a request that makes the model raise (an id past the vocabulary, say) fails by
        itself and the requests merged with it get their answers.
        """
        if len(batch) == 1:
            inputs = batch[0].inputs
        else:
            inputs = {name: np.concatenate([item.inputs[name] for item in batch]) for name in batch[0].inputs}
        started = time.monotonic()
        rows = sum(item.rows for item in batch)
        try:
            self._calls += 1
            try:
                outputs = await loop.run_in_executor(self._executor, self._run, key, inputs)
            finally:
                self._calls -= 1
            if not batch[0].whole:
                _check_batch_major(outputs, rows)
        except Exception as e:
            if len(batch) > 1:
                for item in batch:
                    if not item.future.done():
                        await self._answer(loop, key, [item])
                return
            if not batch[0].future.done():
                batch[0].future.set_exception(e)
            return
        self._called(key, rows, time.monotonic() - started)
        _deliver(batch, outputs)


def _deliver(batch, outputs):
    """Each item of a call its rows of `outputs` (a whole or lone item: all of them)."""
    if batch[0].whole or len(batch) == 1:
        if not batch[0].future.done():
            batch[0].future.set_result(outputs)
        return
    start = 0
    for item in batch:
        if not item.future.done():
            item.future.set_result(
                {name: value[start : start + item.rows] for name, value in outputs.items()}
            )
        start += item.rows


def _check_batch_major(outputs, rows):
    """Refuses outputs that are not [rows, ...]: cut into per-request parts, they would hand
    one request's values to another (or raise in the worker, for a scalar)."""
    for name, value in sorted(outputs.items()):
        shape = np.shape(value)
        if not shape or shape[0] != rows:
            raise UnbatchableOutputError(
                f"The model's output {name!r} has shape {list(shape)}, not one entry per example of the "
                f"{rows} it was given, so it cannot be split between requests."
            )
