"""TF Serving's REST request and response bodies for `:predict`, as numpy arrays.

The formats are TF Serving's (its "RESTful API" guide): a request holds `signature_name`
(default "serving_default") and either `instances` (row format: a list with one entry per
example; a bare value per example when the signature has one input, else an object keyed by
input name) or `inputs` (columnar: a value when the signature has one input, else an object
of name -> list over the examples). The answer mirrors it: `predictions` (a list of values
when there is one output, else of objects) or `outputs`. Strings are JSON strings; a tensor
whose name ends in `_bytes` is `{"b64": ...}` both ways. Every mistake is a `RestApiError`:
HTTP status 400 and one line naming the input, the value and the fix, which the server
returns as TF Serving does, `{"error": "..."}`.
"""

import base64
import binascii
import json
import math
import re

import numpy as np

DEFAULT_SIGNATURE = "serving_default"


class RestApiError(Exception):
    """A request TF Serving would refuse: `status` is the HTTP status, `str()` the message."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


# Terminal control sequences (Keras prints a layer's error in bold: ESC[1m ... ESC[0m).
_TERMINAL_CODES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Keras' wrapper of an error raised inside a layer's call(): the layer, the error, the arguments.
_KERAS_WRAPPER = re.compile(
    r"\s*Exception encountered when calling [\w.]+\(\)\.\s*(.*?)\s*"
    r"(?:Arguments received by .*)?$",
    re.DOTALL,
)


def error_sentence(error):
    """An error raised while a request is computed, as the one clean line of a REST body: the
    message a layer raised, without Keras' wrapper around it (the layer's name, the arguments it
    received, terminal colour codes), its whitespace collapsed."""
    message = _TERMINAL_CODES.sub("", str(error))
    while (wrapped := _KERAS_WRAPPER.match(message)) and wrapped.group(1):
        message = wrapped.group(1)
    return " ".join(message.split())


def _json_body(body):
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RestApiError(
            f'JSON Parse error: {e}. The body must be a JSON object such as {{"instances": ["a text"]}}.'
        ) from None
    except RecursionError:  # [[[[... nested deeper than Python's stack (it was a 500)
        raise RestApiError(
            "JSON Parse error: the body nests lists or objects too deeply to read. Send each "
            "input nested as deep as its shape in the signature's metadata."
        ) from None
    if not isinstance(request, dict):
        raise RestApiError(
            f"The request body must be a JSON object, not a {type(request).__name__}: "
            'send {"instances": [...]} or {"inputs": ...}.'
        )
    return request


def _leaf(value, name, dtype, where):
    """One JSON scalar as the input's dtype."""
    if dtype.name == "string":
        return _string_leaf(value, name, where)
    return _number_leaf(value, name, dtype, where)


def _string_leaf(value, name, where):
    """One JSON string (or {"b64": ...}) as bytes."""
    # {"b64": ...} is binary for any string input (TF Serving's FillTensorProto); a name ending
    # in _bytes only says how outputs are written, and that its inputs need the b64 form.
    if name.endswith("_bytes") or isinstance(value, dict):
        if not (isinstance(value, dict) and set(value) == {"b64"} and isinstance(value["b64"], str)):
            raise RestApiError(
                f'{where} of input {name!r} must be a string or {{"b64": "..."}} '
                f"(binary data, base64); received {json.dumps(value)[:60]}."
            )
        try:
            return base64.b64decode(value["b64"], validate=True)
        except binascii.Error as e:
            raise RestApiError(f"{where} of input {name!r} is not valid base64 ({e}).") from None
    if not isinstance(value, str):
        raise RestApiError(
            f"{where} of input {name!r} must be a string; received {json.dumps(value)[:60]} "
            f"({type(value).__name__}). Send texts as JSON strings."
        )
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate escape ("\\ud800"): valid JSON, not text
        raise RestApiError(
            f"{where} of input {name!r} holds {value[e.start : e.end]!r} at character {e.start}, a "
            "lone UTF-16 surrogate that is no character: send the text as valid Unicode."
        ) from None


def _number_leaf(value, name, dtype, where):
    """One JSON number (or bool) checked against the input's numeric or bool dtype."""
    if dtype.name == "bool":  # TF Serving's JSON mapping: true and false
        if not isinstance(value, bool):
            raise RestApiError(
                f"{where} of input {name!r} must be true or false (bool); received {json.dumps(value)[:60]}."
            )
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RestApiError(
            f"{where} of input {name!r} must be a number ({dtype.name}); received {json.dumps(value)[:60]}."
        )
    if dtype.is_integer and isinstance(value, float) and not value.is_integer():
        raise RestApiError(
            f"{where} of input {name!r} must be an integer ({dtype.name}); received {value!r}."
        )
    if dtype.is_integer and not dtype.min <= value <= dtype.max:
        raise RestApiError(
            f"{where} of input {name!r} holds {value!r}, outside {dtype.name}'s range "
            f"[{dtype.min}, {dtype.max}]: send values the model's input type can hold."
        )
    if (
        dtype.is_floating
        and not (isinstance(value, float) and not math.isfinite(value))
        and abs(value) > float(dtype.max)
    ):
        raise RestApiError(
            f"{where} of input {name!r} holds {value!r}, beyond {dtype.name}'s largest value "
            f"{dtype.max:g}: it cannot be converted without loss of precision."
        )
    return value


def _array(values, name, spec, where):
    """A list over the examples -> numpy [N, ...] of the spec's dtype and rank."""
    rank = spec.shape.rank
    if not isinstance(values, list):
        raise RestApiError(
            f"{where}: input {name!r} must be a list over the examples; received {type(values).__name__}."
        )

    def convert(value, depth, position):
        if depth == rank:
            return _leaf(value, name, spec.dtype, position)
        if not isinstance(value, list):
            raise RestApiError(
                f"{position} of input {name!r} must be a list ({rank - 1}-d per example, "
                f"shape {spec.shape.as_list()[1:]}); received {json.dumps(value)[:60]}."
            )
        return [convert(item, depth + 1, f"{position}[{i}]") for i, item in enumerate(value)]

    rows = [convert(value, 1, f"{where}[{i}]") for i, value in enumerate(values)]
    if spec.dtype.name == "string":
        array = np.empty(len(rows), dtype=object)
        array[:] = rows  # one bytes object per example (rank-1 string inputs)
        if rank != 1:
            array = np.array(rows, dtype=object)
    else:
        try:
            array = np.array(rows, dtype=spec.dtype.as_numpy_dtype)
        except ValueError:
            raise RestApiError(
                f"{where}: the examples of input {name!r} have different lengths; pad them to one "
                "length per request (TF Serving needs a rectangular tensor)."
            ) from None
    if array.ndim != rank:
        raise RestApiError(
            f"{where}: input {name!r} has {array.ndim - 1} dimension(s) per example; the signature "
            f"takes {rank - 1} (shape {spec.shape.as_list()})."
        )
    for axis, size in enumerate(spec.shape.as_list()[1:], 1):
        if size is not None and array.shape[axis] != size:
            raise RestApiError(
                f"{where}: input {name!r} has size {array.shape[axis]} on axis {axis}; the "
                f"signature takes {size}."
            )
    return array


def parse_predict_body(body, signatures):
    """A `:predict` body -> (signature name, {input: numpy [N, ...]}, N, row_format).

    Args:
        body: bytes, the request body.
        signatures: {name: {"inputs": {input: TensorSpec}, ...}} of the model.
    """
    request = _json_body(body)
    signature = _signature_name(request, signatures)
    specs = signatures[signature]["inputs"]
    names = sorted(specs)
    row_format = "instances" in request
    if row_format:
        columns, where = _instance_columns(request["instances"], names, signature), "instances"
    else:
        columns, where = _input_columns(request["inputs"], names, signature), "inputs"
    arrays = {name: _array(columns[name], name, specs[name], where) for name in names}
    sizes = {name: len(array) for name, array in arrays.items()}
    if len(set(sizes.values())) != 1:
        raise RestApiError(
            f"The inputs have different numbers of examples {sizes}: every input needs one value per example."
        )
    rows = next(iter(sizes.values()))
    if rows == 0:
        raise RestApiError(f"'{where}' holds no example: send at least one.")
    return signature, arrays, rows, row_format


def _signature_name(request, signatures):
    """The request's signature, checked, and its keys checked: exactly one of instances, inputs."""
    signature = request.get("signature_name", DEFAULT_SIGNATURE)
    if not isinstance(signature, str) or signature not in signatures:
        raise RestApiError(
            f"Serving signature name: {json.dumps(signature)} not found in signature def. The model "
            f"has {', '.join(sorted(signatures))}."
        )
    unknown = sorted(set(request) - {"signature_name", "instances", "inputs"})
    if unknown:
        raise RestApiError(
            f"Unknown key(s) {unknown} in the request: it takes signature_name and one of "
            "instances or inputs."
        )
    if ("instances" in request) == ("inputs" in request):
        raise RestApiError("Missing 'inputs' or 'instances' key: send exactly one of them.")
    return signature


def _instance_columns(instances, names, signature):
    """The row format's 'instances' -> {input: [value per example]}."""
    if not isinstance(instances, list):
        raise RestApiError(
            f"'instances' must be a list with one entry per example; received {type(instances).__name__}."
        )
    if not instances:
        raise RestApiError("'instances' is an empty list: send at least one example.")
    objects = [isinstance(item, dict) and not (len(item) == 1 and "b64" in item) for item in instances]
    if len(names) > 1 and not all(objects):
        raise RestApiError(
            f"Each instance must be an object with the inputs {names}: the signature "
            f"{signature!r} has more than one."
        )
    if not any(objects):
        return {names[0]: instances}
    if not all(objects):
        raise RestApiError("'instances' mixes objects and bare values: use one form for every example.")
    columns = {}
    for i, item in enumerate(instances):
        if set(item) != set(names):
            raise RestApiError(
                f"instances[{i}] has the keys {sorted(item)}; the signature {signature!r} takes {names}."
            )
        for name in names:
            columns.setdefault(name, []).append(item[name])
    return columns


def _input_columns(inputs, names, signature):
    """The columnar format's 'inputs' -> {input: [value per example]}."""
    if isinstance(inputs, dict) and not (len(inputs) == 1 and "b64" in inputs):
        if set(inputs) != set(names):
            raise RestApiError(
                f"'inputs' has the keys {sorted(inputs)}; the signature {signature!r} takes {names}."
            )
        return inputs
    if len(names) == 1:
        return {names[0]: inputs}
    raise RestApiError(f"'inputs' must be an object with the inputs {names}.")


def _jsonable(array, name):
    if array.dtype == object or array.dtype.kind == "S":
        if not array.size:
            return array.tolist()
        if name.endswith("_bytes"):
            values = [{"b64": base64.b64encode(b).decode("ascii")} for b in array.ravel().tolist()]
        else:
            values = [b.decode("utf-8", errors="replace") for b in array.ravel().tolist()]
        strings = np.empty(len(values), dtype=object)  # a list per axis, as the array's tolist()
        strings[:] = values
        return strings.reshape(array.shape).tolist()
    if array.dtype == np.float32:
        return _float32_decimals(array).tolist()
    return array.tolist()


def _float32_decimals(array):
    """float32 values as the float64s of the decimals TF Serving writes for them (its
    WriteDecimal: "%g" when that reads back as the same float32, else "%.9g"), so 0.1f is 0.1,
    not 0.10000000149011612: a client reading the answer as float64 gets TF Serving's numbers."""
    values = array.ravel().tolist()  # the float32s as Python floats
    short = np.array([float("%g" % v) for v in values])
    exact = short.astype(np.float32) == array.ravel()
    decimals = [s if ok else float("%.9g" % v) for s, ok, v in zip(short.tolist(), exact.tolist(), values)]
    return np.array(decimals, dtype=np.float64).reshape(array.shape)


def format_predict_response(outputs, row_format, rows=None):
    """{output: numpy [N, ...]} -> the JSON object TF Serving answers a `:predict` with.

    rows: the request's example count N. The row format needs every output to have N entries
    (as TF Serving's MakeRowFormatJsonFromTensors, which refuses a scalar or an output of
    another length with a 400); the columnar format writes each output whole."""
    values = {name: _jsonable(array, name) for name, array in sorted(outputs.items())}
    if not row_format:
        return {"outputs": next(iter(values.values())) if len(values) == 1 else values}
    for name, array in sorted(outputs.items()):
        if np.ndim(array) == 0:
            raise RestApiError(
                f"Tensor name: {name} has no shape information (a scalar): the row format "
                "('instances') needs one value per example; send the request as 'inputs' instead."
            )
        if rows is not None and len(array) != rows:
            raise RestApiError(
                f"Tensor name: {name} has inconsistent batch size: {len(array)} expecting: {rows}. "
                "Send the request as 'inputs' (columnar), which returns each output whole."
            )
    if len(values) == 1:
        return {"predictions": next(iter(values.values()))}
    count = len(next(iter(values.values())))
    return {"predictions": [{name: column[i] for name, column in values.items()} for i in range(count)]}
