"""A local server with TF Serving's REST API, for developing clients before deploying to TF Serving.

Built on uvicorn (HTTP/1.1 on httptools and uvloop, graceful shutdown), the model paths answered
on ASGI's messages and the rest routed by Starlette. The endpoints and bodies are TF Serving's:

    GET  /v1/models/NAME[/versions/N]             model_version_status
    GET  /v1/models/NAME[/versions/N]/metadata    the SignatureDefs
    POST /v1/models/NAME[/versions/N]:predict     {"instances": ...} or {"inputs": ...}

plus `GET /healthz` and Prometheus metrics at TF Serving's path
`/monitoring/prometheus/metrics` (and `/metrics`). Errors are TF Serving's `{"error": "..."}`
with 400 (a bad request, or one larger than the whole batch queue), 404 (no such model,
version or path), 413 (a body over the limit) or 503 (the batch queue is full). Concurrent
`:predict` calls to a signature whose inputs and outputs are all batch-major are merged by a
`DynamicBatcher`; any other signature's requests run alone and whole. On SIGTERM or SIGINT
the server stops accepting connections, answers every request it has accepted, and returns.
"""

import asyncio
import contextlib
import errno
import json
import re
import signal
import socket
import time

import uvicorn
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from keras_bert_lite.serve.batch_key import BatchKey
from keras_bert_lite.checks import positive_int
from keras_bert_lite.serve.dynamic_batcher import DynamicBatcher, QueueFullError, UnbatchableOutputError
from keras_bert_lite.serve.rest_api import (
    RestApiError,
    error_sentence,
    format_predict_response,
    parse_predict_body,
)

_MODEL_PATH = re.compile(
    r"^(?P<name>[^/:]+)(?:/versions/(?P<version>[0-9]+))?(?:/(?P<metadata>metadata)|:(?P<method>[A-Za-z]+))?$"
)
_METHODS = ("status", "metadata", "predict", "classify", "regress")
_MODELS = "/v1/models/"  # TF Serving's model paths: /v1/models/NAME[/versions/N][/metadata|:VERB]
SHUTDOWN_SECONDS = 30  # how long SIGTERM waits for accepted requests
# Where an error counts examples: TensorFlow's gather ("indices[3,1] = 40000 is not in [0, 30522)")
# and the id checks, the export's graph's and the LiteRT calls' ("at example 3").
_EXAMPLE_INDEX = re.compile(r"(indices\[|at example )(\d+)")
# A failed Assert of a SavedModel's graph, as str(InvalidArgumentError) puts it once its whitespace
# is collapsed: "Graph execution error: Detected at node Assert/Assert ... assertion failed:
# [MESSAGE] [[{{node Assert/Assert}}]] [Op:...]". The client hears MESSAGE.
_ASSERTION = re.compile(r"assertion failed: \[(.+?)\] \[\[")


def listening_socket(host):
    """An unbound TCP socket for `host` whose accepted connections send without Nagle's algorithm.

    asyncio turns Nagle off (TCP_NODELAY) only on sockets whose protocol number says TCP; a socket
    made with the default 0 kept it on, and uvicorn writes an answer's headers and body apart, so on
    a kept-alive connection the body waited for the client's delayed ACK: about 40 ms a request
    (bench/perf/serve_overhead.py). Linux also passes the listening socket's TCP_NODELAY on to the
    connections it accepts."""
    sock = socket.socket(
        socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP
    )
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class _HeadWithBody:
    """A connection's transport that sends a response's head in the same write as its body.

    uvicorn writes the status line and headers, then the body, as two writes: with Nagle off
    (listening_socket), two TCP segments, two wake-ups of the client and one more system call
    per answer. A head is held until the next write (the body, written by the same task step)
    or, when none follows (a 204, a HEAD, 100 Continue), until the loop's next turn."""

    def __init__(self, transport, loop):
        self._transport, self._loop, self._held = transport, loop, None

    def write(self, data):
        if self._held is not None:
            data, self._held = self._held + bytes(data), None
        elif bytes(data[:5]) == b"HTTP/":
            self._held = bytes(data)
            self._loop.call_soon(self._flush)
            return
        self._transport.write(data)

    def _flush(self):
        if self._held is not None:
            held, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self):
        self._flush()
        self._transport.close()

    def __getattr__(self, name):  # reading, flow control, addresses: the transport's own
        return getattr(self._transport, name)


class _Protocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol on httptools (llhttp, C), writing each answer once."""

    def connection_made(self, transport):
        super().connection_made(_HeadWithBody(transport, self.loop))


def _json_bytes(content):
    """JSON as TF Serving writes it: NaN and +-inf as NaN, Infinity, -Infinity (where Starlette's
    JSONResponse raises ValueError), UTF-8 unescaped."""
    return json.dumps(content, ensure_ascii=False, allow_nan=True, separators=(",", ":")).encode("utf-8")


class _JSONResponse(JSONResponse):
    """Starlette's JSONResponse written by `_json_bytes`."""

    def render(self, content):
        return _json_bytes(content)


def client_error_message(error, first_row):
    """An error's message, one line, with the example it names counted in the client's request:
    a request split into calls of max_batch_size rows hears the error of the part at `first_row`.
    Of a graph's failed Assert, only its message."""
    message = error_sentence(error)
    assertion = _ASSERTION.search(message)
    message = (assertion.group(1) if assertion else message)[:1000]
    if not first_row:
        return message
    renumbered = _EXAMPLE_INDEX.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + first_row}", message)
    if renumbered != message:
        return renumbered
    return (
        f"{message} (in the examples from {first_row} of the request, which ran as one call of "
        "--max-batch-size rows)"
    )


class ModelServer:
    """Serves `models` over TF Serving's REST API.

    Args:
        models: list of servables: each has `name`, `version`, `signatures` ({signature:
            {"inputs": {input: spec}, "outputs": ...}}, a spec with TensorFlow's TensorSpec's
            `dtype` and `shape` attributes: a tf.TensorSpec or `serve.tensor_spec.TensorSpec`),
            `batch_major` ({signature: bool}), `metadata()`, `status()`, `run(signature,
            inputs)` and optionally `input_errors` (the exception types its `run` raises for a
            client's bad input, beside ValueError: a 400) (`keras_bert_impl_export.serve.
            servable_model.ServableModel`, a SavedModel on TensorFlow). Several versions of one name are
            allowed, and the highest answers requests that name no version (TF Serving's default
            policy). Models with a `batch_group` (and `batch_runner`, an `AdapterBatches`) batch
            together: the runner tags their rows and runs the mixed batches.
        max_batch_size, batch_timeout_ms, num_batch_threads, max_enqueued_batches: the
            batching parameters (see DynamicBatcher).
        max_body_bytes: int. A larger request body is refused with 413.
    """

    def __init__(
        self,
        models,
        max_batch_size=32,
        batch_timeout_ms=2.0,
        num_batch_threads=1,
        max_enqueued_batches=1000,
        max_body_bytes=16 * 1024 * 1024,
    ):
        if not models:
            raise ValueError("ModelServer needs at least one model.")
        self.models, self._groups = {}, {}
        for model in models:
            self.models.setdefault(model.name, {})[model.version] = model
            if getattr(model, "batch_group", None):
                self._groups[model.batch_group] = model.batch_runner
        self.max_body_bytes = positive_int("max_body_bytes", max_body_bytes)
        self._input_errors = (ValueError, *{e for m in models for e in getattr(m, "input_errors", ())})
        self.registry = CollectorRegistry()
        self._requests = Counter(
            "kbert_serve_requests",
            "Requests answered, by model, method and HTTP status.",
            ["model", "method", "code"],
            registry=self.registry,
        )
        self._latency = Histogram(
            "kbert_serve_request_seconds",
            "Time from the body's arrival to the answer.",
            ["model", "method"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self._batch_rows = Histogram(
            "kbert_serve_batch_rows",
            "Rows per model call.",
            registry=self.registry,
            buckets=tuple(2**i for i in range(11)),
        )
        self._batch_seconds = Histogram(
            "kbert_serve_batch_seconds", "Seconds per model call.", registry=self.registry
        )
        self.batcher = DynamicBatcher(
            self._run,
            max_batch_size=max_batch_size,
            batch_timeout_ms=batch_timeout_ms,
            num_batch_threads=num_batch_threads,
            max_enqueued_batches=max_enqueued_batches,
            on_batch=self._observe_batch,
        )
        Gauge("kbert_serve_queued_rows", "Rows waiting for a batch.", registry=self.registry).set_function(
            lambda: self.batcher.queued_rows
        )
        self.draining = False
        # :predict requests read, answered (any status), and dropped because their client left first
        self.accepted = self.answered = self.dropped = 0
        self.on_ready = None  # called once the batcher runs (the command prints its address then)
        self._starlette = Starlette(
            routes=[
                Route("/healthz", self._health, methods=["GET"]),
                Route("/monitoring/prometheus/metrics", self._metrics, methods=["GET"]),
                Route("/metrics", self._metrics, methods=["GET"]),
            ],
            lifespan=self._lifespan,
        )
        self._starlette.add_exception_handler(404, self._not_found)
        self._starlette.add_exception_handler(405, self._not_found)

    async def app(self, scope, receive, send):
        """The ASGI application. TF Serving's model paths are answered here on ASGI's own
        messages, without Starlette's routing, request and response objects (about a tenth of a
        millisecond of each one-sentence request: bench/perf/serve_overhead.py); health, metrics,
        unknown paths and the lifespan go to Starlette."""
        if scope["type"] != "http" or not scope["path"].startswith(_MODELS):
            return await self._starlette(scope, receive, send)
        status, content = await self._models(scope, receive)
        headers = [(b"content-length", b"%d" % len(content))]
        if content:
            headers.append((b"content-type", b"application/json"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    # -- lifecycle --------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _lifespan(self, app):
        await self.batcher.start()
        if self.on_ready is not None:
            self.on_ready()
        yield
        await self.batcher.stop()

    def serve(self, host="127.0.0.1", port=8501, on_ready=None):
        """Runs until SIGTERM or SIGINT, then shuts down gracefully. `on_ready(port)` is called
        once requests are answered (port 0 picks a free one)."""
        sock = listening_socket(host)
        try:
            sock.bind((host, port))
        except OSError as e:
            sock.close()
            # An address that does not resolve, or is not this machine's: the host is at fault, not the port.
            if isinstance(e, socket.gaierror) or e.errno == errno.EADDRNOTAVAIL:
                raise OSError(
                    f"cannot listen on {host!r} ({e.strerror}): pass an address of this machine as "
                    "--host, such as 127.0.0.1 or 0.0.0.0"
                ) from None
            raise OSError(
                f"cannot listen on {host}:{port} ({e.strerror}): pass another --port, or 0 for a free one"
            ) from None
        sock.listen(2048)
        bound = sock.getsockname()[1]
        self.on_ready = (lambda: on_ready(bound)) if on_ready is not None else None
        # httptools parses HTTP in C and uvloop runs the event loop on libuv: a quarter less
        # of the server's CPU per request than h11 on asyncio (bench/perf/serve_overhead.py).
        config = uvicorn.Config(
            self.app,
            http=_Protocol,
            interface="asgi3",  # a bound method: uvicorn's guess would read it as ASGI 2
            loop="auto",  # uvloop (setup.py pins it where it builds: not on Windows)
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=SHUTDOWN_SECONDS,
        )
        server = _Server(config, self)
        # uvicorn re-raises the signal that stopped it once it has shut down; these handlers
        # take it, so a SIGTERM'd server returns normally (exit status 0) after its last answer.
        previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            server.run(sockets=[sock])
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            sock.close()
        return 0

    # -- requests ---------------------------------------------------------------

    def _run(self, key, inputs):
        if key.model_name in self._groups:
            return self._groups[key.model_name].run(key.signature, inputs)
        return self.models[key.model_name][key.version].run(key.signature, inputs)

    def _observe_batch(self, rows, seconds):
        self._batch_rows.observe(rows)
        self._batch_seconds.observe(seconds)

    def _answer(self, model, method, started, body, status=200):
        """(status, the JSON bytes of `body`), counted in the metrics."""
        content = _json_bytes(body)  # first: what cannot be written is not counted
        if method == "predict":
            self.answered += 1
        self._requests.labels(model, method, str(status)).inc()
        self._latency.labels(model, method).observe(time.monotonic() - started)
        return status, content

    async def _not_found(self, request, exc):
        return _JSONResponse(
            {"error": f"Malformed request: {request.method} {request.url.path}"}, status_code=404
        )

    async def _health(self, request):
        if self.draining:
            return JSONResponse({"status": "shutting down"}, status_code=503)
        return JSONResponse({"status": "ok", "models": sorted(self.models)})

    async def _metrics(self, request):
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

    def _model(self, name, version):
        versions = self.models.get(name)
        if versions is None:
            raise RestApiError(
                f"Servable not found for request: Latest({name}). This server has "
                f"{', '.join(sorted(self.models))}.",
                status=404,
            )
        if version is None:
            return versions[max(versions)]
        if int(version) not in versions:
            raise RestApiError(
                f"Servable not found for request: Specific({name}, {version}). Loaded versions: "
                f"{', '.join(str(v) for v in sorted(versions))}.",
                status=404,
            )
        return versions[int(version)]

    async def _read_body(self, scope, receive):
        length = dict(scope["headers"]).get(b"content-length", b"").decode("latin-1")
        if length.isdigit() and int(length) > self.max_body_bytes:
            raise RestApiError(
                f"The request body has {int(length)} bytes, over this server's limit of "
                f"{self.max_body_bytes} (--max-body-bytes): send fewer examples per request.",
                status=413,
            )
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _ClientGone()
            chunk, more = message.get("body", b""), message.get("more_body", False)
            size += len(chunk)
            if size > self.max_body_bytes:
                raise RestApiError(
                    f"The request body is over this server's limit of {self.max_body_bytes} bytes "
                    "(--max-body-bytes): send fewer examples per request.",
                    status=413,
                )
            chunks.append(chunk)
        return b"".join(chunks)

    async def _models(self, scope, receive):
        """(HTTP status, JSON body bytes) of a request under /v1/models/."""
        started = time.monotonic()
        http_method, url_path = scope["method"], scope["path"]
        match = _MODEL_PATH.match(url_path[len(_MODELS) :])
        name = match.group("name") if match else "-"
        # TF Serving reads the verb case-insensitively (:PREDICT works there).
        method = (
            ((match.group("method") or "").lower() or ("metadata" if match.group("metadata") else "status"))
            if match
            else "-"
        )
        verb, method = method, method if method in _METHODS else "-"  # metrics label only known methods
        if method == "predict":
            self.accepted += 1
        try:
            if (
                match is None
                or http_method not in ("GET", "HEAD", "POST")
                or (http_method == "POST") != bool(match.group("method"))
            ):
                raise RestApiError(f"Malformed request: {http_method} {url_path}", status=404)
            model = self._model(name, match.group("version"))
            if method == "status":
                versions = (
                    [model]
                    if match.group("version")
                    else [self.models[name][v] for v in sorted(self.models[name])]
                )
                return self._answer(
                    name, method, started, {"model_version_status": [m.status() for m in versions]}
                )
            if method == "metadata":
                return self._answer(name, method, started, model.metadata())
            if verb not in _METHODS:  # TF Serving: InvalidArgument, HTTP 400
                raise RestApiError(
                    f"Malformed request: {http_method} {url_path}: the verb is :predict "
                    "(or :classify, :regress).",
                    status=400,
                )
            if method != "predict":
                raise RestApiError(
                    f"{method} needs a classification or regression signature (tf.Example input); "
                    f"{name} has predict signatures only: POST .../{name}:predict.",
                    status=400,
                )
            body = await self._read_body(scope, receive)
            outputs, rows, row_format = await self._predict(model, body, receive)
            return self._answer(name, method, started, format_predict_response(outputs, row_format, rows))
        except _ClientGone:  # nobody to answer; its rows left the queue uncomputed
            self.dropped += 1
            return 499, b""
        except RestApiError as e:
            return self._answer(name, method, started, {"error": str(e)}, status=e.status)
        except Exception as e:  # a bug of ours: the client hears it, the server lives on
            body = {"error": f"Internal error: {type(e).__name__}: {error_sentence(e)}"}
            return self._answer(name, method, started, body, status=500)

    async def _predict(self, model, body, receive):
        """(outputs, rows, row_format) of a `:predict` body; a RestApiError for what fails, and
        _ClientGone when the client disconnects first (its request leaves the queue)."""
        signature, inputs, rows, row_format = parse_predict_body(body, model.signatures)
        key = BatchKey.of(model, signature, inputs)
        if getattr(model, "batch_group", None):
            inputs = model.batch_runner.inputs(model, inputs, rows)
        whole = not model.batch_major[signature]
        try:
            inline = self.batcher.runs_now(key, rows, whole)
            if inline and await _gone_already(receive):
                raise _ClientGone()
            # Asked again: during that turn of the loop another request may have started a call.
            if inline and self.batcher.runs_now(key, rows, whole):
                outputs = self.batcher.run_now(key, inputs, rows, whole=whole)
            elif self.batcher.starts_at_once(rows, whole):  # no queue to leave: no watcher needed
                outputs = await self.batcher.submit(key, inputs, rows, whole=whole)
            else:
                outputs = await self._unless_gone(
                    self.batcher.submit(key, inputs, rows, whole=whole), receive
                )
        except QueueFullError as e:
            raise RestApiError(f"The server is overloaded: {e}. Retry later.", status=503) from None
        except self._input_errors as e:
            raise RestApiError(client_error_message(e, getattr(e, "first_row", 0)), status=400) from None
        except UnbatchableOutputError as e:
            raise RestApiError(
                f"{e} Signature {signature!r} of {model.name} returned it.", status=500
            ) from None
        return outputs, rows, row_format

    @staticmethod
    async def _unless_gone(submitted, receive):
        """The outputs of `submitted` (the batcher's coroutine), or _ClientGone when the client
        disconnects first: its parts leave the queue uncomputed."""
        work = asyncio.ensure_future(submitted)
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not work.done():
            work.cancel()
            await asyncio.wait({work})  # its parts are cancelled: the batcher skips them
            raise _ClientGone()
        return work.result()


class _ClientGone(Exception):
    """The client of a `:predict` disconnected before its answer."""


async def _gone_already(receive):
    """Whether the client has disconnected by now. One turn of the event loop lets a close that has
    arrived be read (while a call ran on the loop's thread, a client could send and leave), and
    uvicorn's receive() then answers http.disconnect at once; otherwise it waits, and is cancelled."""
    probe = asyncio.ensure_future(receive())
    await asyncio.sleep(0)
    if probe.done():
        return probe.result()["type"] == "http.disconnect"
    probe.cancel()
    return False


async def _disconnected(receive):
    """Returns once the client disconnects. The body is read by then, so the next ASGI message
    is http.disconnect: uvicorn sends it when the connection drops (or the response is done)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class _Server(uvicorn.Server):
    """uvicorn's server, telling the ModelServer when shutdown starts (health says 503 then)."""

    def __init__(self, config, model_server):
        super().__init__(config)
        self._model_server = model_server

    async def shutdown(self, sockets=None):
        self._model_server.draining = True
        await super().shutdown(sockets=sockets)
