"""TFLite metadata that MediaPipe Tasks' `TextClassifier` and `TextEmbedder` load unchanged.

A .tflite file with metadata is three things (tflite-support's `MetadataPopulator`, which
MediaPipe's metadata writers call, lays it out the same way):

1. the model flatbuffer, whose `metadata` list gains an entry "TFLITE_METADATA" naming a
   buffer, next to what the converter wrote there ("min_runtime_version",
   "CONVERSION_METADATA");
2. in that buffer, a `ModelMetadata` flatbuffer (file identifier "M001", the schema of
   tflite-support's and MediaPipe's `metadata_schema.fbs`);
3. the associated files (vocab.txt, labels.txt) as a zip archive appended to the flatbuffer,
   stored uncompressed, its offsets counted from the start of the file, so the whole file is
   also a valid zip.

What MediaPipe checks (mediapipe/tasks/cc/...): a single subgraph; three int32 inputs of
one fixed shape [1, N] whose tensor metadata are named "ids", "mask" and "segment_ids" in
any order (`BertPreprocessorCalculator` finds them by these names); the first *subgraph*
input process unit is a `BertTokenizerOptions` whose first vocab file is in the zip; each
output's metadata has a name (the head name of the results); a classifier's labels come from
the output's first TENSOR_AXIS_LABELS file; outputs are float32 (or uint8). The metadata's
`min_parser_version` must not exceed the runtime's parser version.

MediaPipe's tokenizer is not ours: it ASCII-lower-cases the text and runs WordPiece over a
whitespace/punctuation/CJK split, without BERT's accent stripping or Unicode lower-casing.
On lower-case ASCII text the ids agree; text with accents can get other ids (measured in
tests/export/test_tflite_metadata.py). A cased model cannot be described at all: MediaPipe
has no setting for casing and always lower-cases, so `add_metadata` refuses
`lowercase=False` (the text-in .tflite, which carries our own tokenizer, serves such models).

The model bytes are kept verbatim. A flatbuffer's references only point forward, so the
new root table, its buffer and metadata lists and the metadata buffer are written *in front
of* the original bytes (shifted by a multiple of 64, so every alignment the converter gave
the weights holds) and refer forward into them; nothing is unpacked and packed again.
"""

import io
import zipfile

import flatbuffers
from flatbuffers import encode, number_types
from flatbuffers.table import Table

from keras_bert_impl.tensor_names import EXPORT_ID_INPUTS, MEDIAPIPE_OUTPUTS
from keras_bert_impl.tokenization import load_vocabulary
from keras_bert_impl.validation import check_bool, check_choice, check_label_names, preview

# The heads MediaPipe Tasks describe; the output tensor metadata is named MEDIAPIPE_OUTPUTS[kind]
# (MediaPipe reports it as `head_name`).
KINDS = tuple(MEDIAPIPE_OUTPUTS)
VOCAB_FILE = "vocab.txt"
LABELS_FILE = "labels.txt"
METADATA_NAME = "TFLITE_METADATA"

# The oldest metadata parser that reads what this module writes (MediaPipe's
# metadata_version.cc): AssociatedFileType.VOCABULARY came in 1.0.1,
# SubGraphMetadata.input_process_units and BertTokenizerOptions in 1.1.0. Nothing newer
# (tensor groups, AssociatedFile.version, custom metadata) is written.
MIN_PARSER_VERSION = "1.1.0"

_TFLITE_IDENTIFIER = b"TFL3"
_METADATA_IDENTIFIER = b"M001"
# The original model moves by a multiple of this, so its buffers keep their alignment.
_MODEL_ALIGNMENT = 64
# The schema's force_align for Buffer.data.
_BUFFER_ALIGNMENT = 16
# Fixed zip entry time: the same inputs give the same bytes.
_ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)

_INPUT_DESCRIPTIONS = {
    "ids": "WordPiece ids of [CLS] text [SEP], padded with 0.",
    "mask": "1 for real tokens, 0 for padding.",
    "segment_ids": "0 for every token of a single text.",
}
_OUTPUT_DESCRIPTIONS = {
    "classifier": "Probability of each label (softmax applied), in label id order.",
    "embedder": "Sentence embedding.",
}
_DEFAULT_DESCRIPTIONS = {
    "classifier": "BERT text classifier exported by keras_bert_impl.",
    "embedder": "BERT sentence embedder exported by keras_bert_impl.",
}
_VOCAB_DESCRIPTION = "WordPiece vocabulary, one token per line in id order."
_LABELS_DESCRIPTION = "Label names, one per line in class id order."

# Slots (field ids) and enum values of the two schemas, as their .fbs files declare them.
# tensorflow/lite/schema/schema.fbs
_MODEL_VERSION, _MODEL_OPERATOR_CODES, _MODEL_SUBGRAPHS, _MODEL_DESCRIPTION = 0, 1, 2, 3
_MODEL_BUFFERS, _MODEL_METADATA_BUFFER, _MODEL_METADATA, _MODEL_SIGNATURE_DEFS = 4, 5, 6, 7
_MODEL_FIELDS = 8
_SUBGRAPH_TENSORS, _SUBGRAPH_INPUTS, _SUBGRAPH_OUTPUTS = 0, 1, 2
_TENSOR_SHAPE, _TENSOR_TYPE, _TENSOR_NAME, _TENSOR_SHAPE_SIGNATURE = 0, 1, 3, 7
_BUFFER_DATA, _BUFFER_OFFSET = 0, 1
_METADATA_ENTRY_NAME, _METADATA_ENTRY_BUFFER = 0, 1
_SIGNATURE_INPUTS, _SIGNATURE_OUTPUTS, _SIGNATURE_KEY = 0, 1, 2
_TENSOR_MAP_NAME, _TENSOR_MAP_INDEX = 0, 1
_TENSOR_TYPES = {
    0: "float32",
    1: "float16",
    2: "int32",
    3: "uint8",
    4: "int64",
    5: "string",
    6: "bool",
    7: "int16",
    9: "int8",
}
_INT32, _FLOAT32 = 2, 0
# metadata_schema.fbs
_MM_NAME, _MM_DESCRIPTION, _MM_VERSION, _MM_SUBGRAPHS, _MM_MIN_PARSER_VERSION = 0, 1, 2, 3, 7
_MM_FIELDS = 8
_SG_INPUTS, _SG_OUTPUTS, _SG_INPUT_PROCESS_UNITS = 2, 3, 5
_SG_FIELDS = 10
_TM_NAME, _TM_DESCRIPTION, _TM_CONTENT, _TM_STATS, _TM_FILES = 0, 1, 3, 5, 6
_TM_FIELDS = 7
_CONTENT_PROPERTIES_TYPE, _CONTENT_PROPERTIES = 0, 1
_PU_OPTIONS_TYPE, _PU_OPTIONS = 0, 1
_STATS_MAX, _STATS_MIN = 0, 1
_FILE_NAME, _FILE_DESCRIPTION, _FILE_TYPE = 0, 1, 2
_FEATURE_PROPERTIES = 1
_CONTENT_NAMES = {
    1: "FeatureProperties",
    2: "ImageProperties",
    3: "BoundingBoxProperties",
    4: "AudioProperties",
}
_BERT_TOKENIZER = 4
_PROCESS_UNIT_NAMES = {
    1: "NormalizationOptions",
    2: "ScoreCalibrationOptions",
    3: "ScoreThresholdingOptions",
    4: "BertTokenizerOptions",
    5: "SentencePieceTokenizerOptions",
    6: "RegexTokenizerOptions",
}
_FILE_TYPE_NAMES = {
    0: "UNKNOWN",
    1: "DESCRIPTIONS",
    2: "TENSOR_AXIS_LABELS",
    3: "TENSOR_VALUE_LABELS",
    4: "TENSOR_AXIS_SCORE_CALIBRATION",
    5: "VOCABULARY",
    6: "SCANN_INDEX_FILE",
}
_AXIS_LABELS, _VOCABULARY = 2, 5


def add_metadata(
    tflite_bytes, *, kind, vocabulary, lowercase, label_names=None, name=None, description=None, version=None
):
    """The .tflite with MediaPipe Tasks metadata and its vocab (and label) files packed in.

    Args:
        tflite_bytes: the converted model: one subgraph, a signature whose inputs are int32
            [1, N] tensors named "ids", "mask" and "segment_ids", and one float32 output:
            probabilities [1, C] (softmax applied) for a classifier, [1, H] for an embedder.
        kind: "classifier" (MediaPipe `TextClassifier`) or "embedder" (`TextEmbedder`).
        vocabulary: the WordPiece tokens in id order (a list, or a vocab.txt path).
        lowercase: must be True: MediaPipe lower-cases the input text and has no setting
            for casing, so a cased model cannot be served through this metadata.
        label_names: the C class names in id order; a classifier needs them, an embedder
            takes none.
        name, description, version: the model's general metadata (str or None).

    Returns:
        bytes: the model with its metadata, followed by a zip of vocab.txt (and labels.txt).

    Usage (the exporter's call; tests/export/test_tflite_metadata.py runs it on real models):

        with open("model.tflite", "rb") as f:
            tflite = add_metadata(f.read(), kind="classifier", vocabulary="data/minilm/vocab.txt",
                                  lowercase=True, label_names=["negative", "positive"])
        read_metadata(tflite)["label_names"]  # ['negative', 'positive']
    """
    check_choice("kind", kind, KINDS)
    model_bytes = _check_tflite_bytes(tflite_bytes)
    vocabulary = _check_vocabulary(vocabulary)
    check_bool("lowercase", lowercase)
    if not lowercase:
        raise ValueError(
            "lowercase=False cannot be described in MediaPipe metadata: MediaPipe's BERT preprocessor "
            "always lower-cases the input text (it has no casing setting), so a cased model would get "
            "other ids than it was trained on. Received: lowercase=False. Serve a cased model through "
            "the text-in .tflite, which carries its own tokenizer."
        )
    name = _check_text("name", name) or ("BertClassifier" if kind == "classifier" else "BertEmbedder")
    description = _check_text("description", description) or _DEFAULT_DESCRIPTIONS[kind]
    version = _check_text("version", version)

    model = _root(model_bytes, _TFLITE_IDENTIFIER)
    entries = [entry.string(_METADATA_ENTRY_NAME) for entry in model.tables(_MODEL_METADATA)]
    if METADATA_NAME in entries:
        raise ValueError(
            "This .tflite already carries TFLITE_METADATA; add metadata to the converter's output, "
            "not to a file that has it."
        )
    if zipfile.is_zipfile(io.BytesIO(model_bytes)):
        raise ValueError(
            "This .tflite already has files appended (a zip archive); add metadata to the converter's "
            "output, not to a file that has some."
        )
    for i, buffer in enumerate(model.tables(_MODEL_BUFFERS)):
        if buffer.scalar(_BUFFER_OFFSET, number_types.Uint64Flags, 0) > 1:
            raise ValueError(
                f"Buffer {i} of this .tflite lies outside the flatbuffer (the >2 GB layout), which this "
                "writer cannot move; convert without buffer offsets."
            )
    inputs, output = _check_signature(model)

    files = {VOCAB_FILE: ("\n".join(vocabulary) + "\n").encode("utf-8")}
    if kind == "classifier":
        num_classes = output["shape"][1]
        if label_names is None:
            raise ValueError(
                f"kind='classifier' needs label_names (the {num_classes} class names in id order): "
                "MediaPipe's TextClassifier reports them as category names."
            )
        label_names = check_label_names(label_names, num_classes)
        bad = [n for n in label_names if "\n" in n or "\r" in n]
        if bad:
            raise ValueError(
                "label_names go into a file of one name per line and cannot hold line breaks. Received: "
                f"{preview(bad)}"
            )
        files[LABELS_FILE] = "\n".join(label_names).encode("utf-8")
    elif label_names is not None:
        raise ValueError(
            "kind='embedder' takes no label_names (an embedding has no classes). Received: "
            f"label_names={label_names!r}"
        )

    metadata = _build_metadata(kind, name, description, version, inputs)
    return _append_files(_splice_metadata(model_bytes, model, metadata), files)


def read_metadata(tflite_bytes):
    """What `add_metadata` wrote, as plain Python: the general fields, the input and output
    tensor metadata (in the subgraph's tensor order), the tokenizer process units, the packed
    files and the vocabulary and label names read back from them.

    Raises ValueError when the bytes are not a TFLite model or carry no TFLITE_METADATA.
    """
    model_bytes = _check_tflite_bytes(tflite_bytes)
    model = _root(model_bytes, _TFLITE_IDENTIFIER)
    entries = {
        entry.string(_METADATA_ENTRY_NAME): entry.scalar(_METADATA_ENTRY_BUFFER, number_types.Uint32Flags, 0)
        for entry in model.tables(_MODEL_METADATA)
    }
    if METADATA_NAME not in entries:
        raise ValueError(
            f"This .tflite carries no TFLITE_METADATA (its metadata entries: {sorted(entries)})."
        )
    buffers = model.tables(_MODEL_BUFFERS)
    metadata_bytes = buffers[entries[METADATA_NAME]].bytes(_BUFFER_DATA)
    root = _root(metadata_bytes, _METADATA_IDENTIFIER)

    subgraph = model.tables(_MODEL_SUBGRAPHS)[0]
    tensors = subgraph.tables(_SUBGRAPH_TENSORS)
    input_tensors = [tensors[i] for i in subgraph.scalars(_SUBGRAPH_INPUTS, number_types.Int32Flags)]
    output_tensors = [tensors[i] for i in subgraph.scalars(_SUBGRAPH_OUTPUTS, number_types.Int32Flags)]
    subgraphs = root.tables(_MM_SUBGRAPHS)
    if len(subgraphs) != 1:
        raise ValueError(f"The metadata describes {len(subgraphs)} subgraphs; MediaPipe reads exactly one.")
    meta = subgraphs[0]

    def tensor_entries(tables, model_tensors):
        described = []
        for table, tensor in zip(tables, model_tensors):
            content = table.table(_TM_CONTENT)
            stats = table.table(_TM_STATS)
            described.append(
                {
                    "name": table.string(_TM_NAME),
                    "description": table.string(_TM_DESCRIPTION),
                    "tensor": tensor.string(_TENSOR_NAME),
                    "shape": tensor.scalars(_TENSOR_SHAPE, number_types.Int32Flags),
                    "content": None
                    if content is None
                    else _CONTENT_NAMES.get(
                        content.scalar(_CONTENT_PROPERTIES_TYPE, number_types.Uint8Flags, 0)
                    ),
                    "stats": None
                    if stats is None
                    else {
                        "min": stats.scalars(_STATS_MIN, number_types.Float32Flags),
                        "max": stats.scalars(_STATS_MAX, number_types.Float32Flags),
                    },
                    "associated_files": [_file_entry(f) for f in table.tables(_TM_FILES)],
                }
            )
        return described

    inputs = tensor_entries(meta.tables(_SG_INPUTS), input_tensors)
    outputs = tensor_entries(meta.tables(_SG_OUTPUTS), output_tensors)
    units = []
    for unit in meta.tables(_SG_INPUT_PROCESS_UNITS):
        kind = unit.scalar(_PU_OPTIONS_TYPE, number_types.Uint8Flags, 0)
        entry = {"type": _PROCESS_UNIT_NAMES.get(kind, kind)}
        if kind == _BERT_TOKENIZER:
            entry["vocab_files"] = [_file_entry(f) for f in unit.table(_PU_OPTIONS).tables(0)]
        units.append(entry)

    files = {}
    archive = io.BytesIO(model_bytes)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            files = {info.filename: z.read(info) for info in z.infolist()}

    def lines_of(name):
        text = files[name].decode("utf-8") if name in files else None
        return None if text is None else [line for line in text.split("\n") if line]

    vocab_name = next((u["vocab_files"][0]["name"] for u in units if u.get("vocab_files")), None)
    label_name = next(
        (f["name"] for o in outputs for f in o["associated_files"] if f["type"] == "TENSOR_AXIS_LABELS"), None
    )
    return {
        "name": root.string(_MM_NAME),
        "description": root.string(_MM_DESCRIPTION),
        "version": root.string(_MM_VERSION),
        "min_parser_version": root.string(_MM_MIN_PARSER_VERSION),
        "kind": "classifier" if label_name else ("embedder" if outputs else None),
        "model_metadata_entries": list(entries),
        "inputs": inputs,
        "input_process_units": units,
        "outputs": outputs,
        "associated_files": sorted(files),
        "vocabulary": lines_of(vocab_name) if vocab_name else None,
        "label_names": lines_of(label_name) if label_name else None,
    }


# --- checks ---------------------------------------------------------------------------


def _check_tflite_bytes(tflite_bytes):
    if not isinstance(tflite_bytes, (bytes, bytearray, memoryview)):
        raise ValueError(
            "tflite_bytes must be the bytes of a .tflite file. "
            f"Received: an object of type {type(tflite_bytes).__name__}"
        )
    data = bytes(tflite_bytes)
    if len(data) < 8 or data[4:8] != _TFLITE_IDENTIFIER:
        raise ValueError(
            f"tflite_bytes is not a TFLite model: it lacks the flatbuffer identifier 'TFL3' at bytes 4-8 "
            f"(found {data[4:8]!r} in {len(data)} bytes)."
        )
    return data


def _check_vocabulary(vocabulary):
    if vocabulary is None or isinstance(vocabulary, (bytes, bytearray)):
        raise ValueError(
            "vocabulary must be a list of WordPiece tokens or a vocab.txt path. Received: "
            f"vocabulary={vocabulary!r}"
        )
    tokens = load_vocabulary(vocabulary)
    # MediaPipe reads the vocab file line by line, skips empty lines and drops one trailing
    # "\r": any such token would shift every id after it.
    bad = [t for t in tokens if not isinstance(t, str) or not t or "\n" in t or "\r" in t]
    if bad:
        raise ValueError(
            "vocabulary tokens must be non-empty strings without line breaks (the vocab file holds one "
            f"token per line). Received: {preview(bad)}"
        )
    return tokens


def _check_text(name, value):
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"{name} must be a non-empty string or None. Received: {name}={value!r}")
    return value


def _check_signature(model):
    """The input tensor names in subgraph order and the output's facts, or a ValueError saying
    what MediaPipe would reject."""
    subgraphs = model.tables(_MODEL_SUBGRAPHS)
    if len(subgraphs) != 1:
        raise ValueError(
            f"MediaPipe text tasks run single-subgraph models; this .tflite has {len(subgraphs)} subgraphs."
        )
    subgraph = subgraphs[0]
    tensors = subgraph.tables(_SUBGRAPH_TENSORS)
    signatures = model.tables(_MODEL_SIGNATURE_DEFS)
    keys = [s.string(_SIGNATURE_KEY) for s in signatures]
    if "serving_default" in keys:
        signature = signatures[keys.index("serving_default")]
    elif len(signatures) == 1:
        signature = signatures[0]
    else:
        raise ValueError(
            f"The .tflite needs a serving_default signature naming its inputs {list(EXPORT_ID_INPUTS)}. "
            f"Received signatures: {keys}"
        )
    by_index = {
        m.scalar(_TENSOR_MAP_INDEX, number_types.Uint32Flags, 0): m.string(_TENSOR_MAP_NAME)
        for m in signature.tables(_SIGNATURE_INPUTS)
    }
    input_indices = subgraph.scalars(_SUBGRAPH_INPUTS, number_types.Int32Flags)
    names = [by_index.get(i) for i in input_indices]
    if sorted(n or "" for n in names) != sorted(EXPORT_ID_INPUTS):
        raise ValueError(
            f"MediaPipe's BERT input needs exactly three model inputs named {list(EXPORT_ID_INPUTS)}. "
            f"Received inputs: {names}"
        )
    shapes = []
    for name, index in zip(names, input_indices):
        tensor = tensors[index]
        dtype = tensor.scalar(_TENSOR_TYPE, number_types.Int8Flags, 0)
        shape = tensor.scalars(_TENSOR_SHAPE, number_types.Int32Flags)
        signature_shape = tensor.scalars(_TENSOR_SHAPE_SIGNATURE, number_types.Int32Flags) or shape
        if dtype != _INT32:
            raise ValueError(
                f"Input {name!r} must be int32 for MediaPipe. Received: {_TENSOR_TYPES.get(dtype, dtype)}"
            )
        if len(shape) != 2 or shape[0] != 1 or shape[1] < 3 or signature_shape != shape:
            raise ValueError(
                f"Input {name!r} must have the fixed shape [1, N] with N >= 3 (MediaPipe feeds one text at a "
                f"time, padded to N). Received: shape={shape}, shape_signature={signature_shape}"
            )
        shapes.append(shape)
    if any(s != shapes[0] for s in shapes):
        raise ValueError(f"The inputs {names} must share one shape [1, N]. Received: {shapes}")

    output_indices = subgraph.scalars(_SUBGRAPH_OUTPUTS, number_types.Int32Flags)
    if len(output_indices) != 1:
        raise ValueError(
            "The .tflite must have exactly one output (probabilities or embeddings). Received: "
            f"{len(output_indices)}"
        )
    tensor = tensors[output_indices[0]]
    dtype = tensor.scalar(_TENSOR_TYPE, number_types.Int8Flags, 0)
    shape = tensor.scalars(_TENSOR_SHAPE, number_types.Int32Flags)
    if dtype != _FLOAT32:
        raise ValueError(f"The output must be float32. Received: {_TENSOR_TYPES.get(dtype, dtype)}")
    if len(shape) != 2 or shape[0] != 1 or shape[1] < 1:
        raise ValueError(f"The output must have shape [1, C] (or [1, H]). Received: shape={shape}")
    return names, {"shape": shape}


# --- the metadata flatbuffer ----------------------------------------------------------


class _TableWriter:
    """The metadata schema's tables and vectors, written on one flatbuffers Builder `b`."""

    def __init__(self, b):
        self.b = b

    def table(self, num_fields, fields):
        """A table from (slot, writer) pairs; writers run inside StartObject/EndObject."""
        self.b.StartObject(num_fields)
        for slot, write in fields:
            write(slot)
        return self.b.EndObject()

    def ref(self, value):
        return lambda slot: self.b.PrependUOffsetTRelativeSlot(slot, value, 0)

    def vector(self, offsets):
        self.b.StartVector(4, len(offsets), 4)
        for offset in reversed(offsets):
            self.b.PrependUOffsetTRelative(offset)
        return self.b.EndVector()

    def floats(self, values):
        self.b.StartVector(4, len(values), 4)
        for value in reversed(values):
            self.b.PrependFloat32(value)
        return self.b.EndVector()

    def associated_file(self, file_name, file_description, file_type):
        name_off, description_off = self.b.CreateString(file_name), self.b.CreateString(file_description)
        return self.table(
            5,
            [
                (_FILE_NAME, self.ref(name_off)),
                (_FILE_DESCRIPTION, self.ref(description_off)),
                (_FILE_TYPE, lambda slot: self.b.PrependInt8Slot(slot, file_type, 0)),
            ],
        )

    def tensor_metadata(self, tensor_name, tensor_description, files=(), stats=None):
        b, table, ref = self.b, self.table, self.ref
        name_off, description_off = b.CreateString(tensor_name), b.CreateString(tensor_description)
        feature = table(0, [])
        content = table(
            3,
            [
                (_CONTENT_PROPERTIES_TYPE, lambda slot: b.PrependUint8Slot(slot, _FEATURE_PROPERTIES, 0)),
                (_CONTENT_PROPERTIES, ref(feature)),
            ],
        )
        fields = [
            (_TM_NAME, ref(name_off)),
            (_TM_DESCRIPTION, ref(description_off)),
            (_TM_CONTENT, ref(content)),
        ]
        if stats is not None:
            low, high = self.floats(stats[0]), self.floats(stats[1])
            fields.append((_TM_STATS, ref(table(2, [(_STATS_MIN, ref(low)), (_STATS_MAX, ref(high))]))))
        if files:
            fields.append((_TM_FILES, ref(self.vector([self.associated_file(*f) for f in files]))))
        return table(_TM_FIELDS, fields)


def _build_metadata(kind, name, description, version, input_names):
    """The ModelMetadata flatbuffer (identifier "M001") for the inputs in subgraph order."""
    b = flatbuffers.Builder(1024)
    w = _TableWriter(b)
    table, ref, vector, tensor_metadata = w.table, w.ref, w.vector, w.tensor_metadata
    associated_file = w.associated_file

    inputs = vector([tensor_metadata(n, _INPUT_DESCRIPTIONS[n]) for n in input_names])
    if kind == "classifier":
        output = tensor_metadata(
            MEDIAPIPE_OUTPUTS[kind],
            _OUTPUT_DESCRIPTIONS[kind],
            files=[(LABELS_FILE, _LABELS_DESCRIPTION, _AXIS_LABELS)],
            stats=([0.0], [1.0]),
        )
    else:
        output = tensor_metadata(MEDIAPIPE_OUTPUTS[kind], _OUTPUT_DESCRIPTIONS[kind])
    outputs = vector([output])
    vocab = vector([associated_file(VOCAB_FILE, _VOCAB_DESCRIPTION, _VOCABULARY)])
    tokenizer_options = table(1, [(0, ref(vocab))])
    tokenizer = table(
        2,
        [
            (_PU_OPTIONS_TYPE, lambda slot: b.PrependUint8Slot(slot, _BERT_TOKENIZER, 0)),
            (_PU_OPTIONS, ref(tokenizer_options)),
        ],
    )
    units = vector([tokenizer])
    subgraph = table(
        _SG_FIELDS,
        [(_SG_INPUTS, ref(inputs)), (_SG_OUTPUTS, ref(outputs)), (_SG_INPUT_PROCESS_UNITS, ref(units))],
    )
    subgraphs = vector([subgraph])
    strings = {
        slot: b.CreateString(text)
        for slot, text in (
            (_MM_NAME, name),
            (_MM_DESCRIPTION, description),
            (_MM_VERSION, version),
            (_MM_MIN_PARSER_VERSION, MIN_PARSER_VERSION),
        )
        if text is not None
    }
    root = table(
        _MM_FIELDS, [(_MM_SUBGRAPHS, ref(subgraphs))] + [(slot, ref(off)) for slot, off in strings.items()]
    )
    b.Finish(root, file_identifier=_METADATA_IDENTIFIER)
    return bytes(b.Output())


# --- splicing it into the model -------------------------------------------------------


def _splice_metadata(model_bytes, model, metadata):
    """The model with a new root table in front of its unchanged bytes: the same fields, plus a
    buffer holding `metadata` and a TFLITE_METADATA entry naming it."""
    unknown = [slot for slot in range(_MODEL_FIELDS, model.num_slots()) if model.has(slot)]
    if unknown:
        raise ValueError(
            f"This .tflite's Model table has fields {unknown} that this writer does not know (a newer TFLite "
            "schema); it would drop them, so it stops here."
        )
    b = flatbuffers.Builder(len(model_bytes) + len(metadata) + 65536)
    # The original bytes first (they end up last): aligned so that their start lands on a
    # multiple of _MODEL_ALIGNMENT in the final file (Finish pads the total to minalign).
    b.Prep(_MODEL_ALIGNMENT, len(model_bytes))
    old_start = b.CreateByteVector(model_bytes) - number_types.UOffsetTFlags.bytewidth

    def old(position):
        """A builder offset for an absolute position in the original bytes."""
        return old_start - position

    b.Prep(_BUFFER_ALIGNMENT, len(metadata))
    data = b.CreateByteVector(metadata)
    b.StartObject(3)
    b.PrependUOffsetTRelativeSlot(_BUFFER_DATA, data, 0)
    new_buffer = b.EndObject()
    name = b.CreateString(METADATA_NAME)
    buffer_positions = model.table_positions(_MODEL_BUFFERS)
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(_METADATA_ENTRY_NAME, name, 0)
    b.PrependUint32Slot(_METADATA_ENTRY_BUFFER, len(buffer_positions), 0)
    new_entry = b.EndObject()

    def vector_of(positions, extra):
        b.StartVector(4, len(positions) + 1, 4)
        b.PrependUOffsetTRelative(extra)
        for position in reversed(positions):
            b.PrependUOffsetTRelative(old(position))
        return b.EndVector()

    buffers = vector_of(buffer_positions, new_buffer)
    entries = vector_of(model.table_positions(_MODEL_METADATA), new_entry)
    b.StartObject(_MODEL_FIELDS)
    b.PrependUint32Slot(_MODEL_VERSION, model.scalar(_MODEL_VERSION, number_types.Uint32Flags, 0), 0)
    kept = (
        _MODEL_OPERATOR_CODES,
        _MODEL_SUBGRAPHS,
        _MODEL_DESCRIPTION,
        _MODEL_METADATA_BUFFER,
        _MODEL_SIGNATURE_DEFS,
    )
    for slot in kept:
        if model.has(slot):
            b.PrependUOffsetTRelativeSlot(slot, old(model.target(slot)), 0)
    b.PrependUOffsetTRelativeSlot(_MODEL_BUFFERS, buffers, 0)
    b.PrependUOffsetTRelativeSlot(_MODEL_METADATA, entries, 0)
    root = b.EndObject()
    b.Finish(root, file_identifier=_TFLITE_IDENTIFIER)
    out = bytes(b.Output())
    start = len(out) - old_start
    assert start % _MODEL_ALIGNMENT == 0 and out[start : start + len(model_bytes)] == model_bytes
    return out


def _append_files(model_bytes, files):
    """`files` appended as an uncompressed zip whose offsets count from the file's start (what
    MediaPipe's metadata extractor and Python's zipfile both read)."""
    stream = io.BytesIO(model_bytes)
    stream.seek(0, io.SEEK_END)
    with zipfile.ZipFile(stream, "a", compression=zipfile.ZIP_STORED) as z:
        for file_name, content in files.items():
            z.writestr(zipfile.ZipInfo(file_name, date_time=_ZIP_DATE_TIME), content)
    return stream.getvalue()


def _file_entry(table):
    kind = table.scalar(_FILE_TYPE, number_types.Int8Flags, 0)
    return {
        "name": table.string(_FILE_NAME),
        "description": table.string(_FILE_DESCRIPTION),
        "type": _FILE_TYPE_NAMES.get(kind, kind),
    }


def _root(data, identifier):
    if len(data) < 8 or data[4:8] != identifier:
        raise ValueError(
            f"Expected a flatbuffer with identifier {identifier.decode()}; found {bytes(data[4:8])!r}."
        )
    return _Table(data, encode.Get(number_types.UOffsetTFlags.packer_type, data, 0))


class _Table:
    """Read access to one flatbuffer table by field slot (what generated code does per field)."""

    def __init__(self, data, position):
        self._t = Table(data, position)

    def _offset(self, slot):
        return self._t.Offset(4 + 2 * slot)

    def num_slots(self):
        vtable = self._t.Pos - self._t.Get(number_types.SOffsetTFlags, self._t.Pos)
        return (self._t.Get(number_types.VOffsetTFlags, vtable) - 4) // 2

    def has(self, slot):
        return self._offset(slot) != 0

    def target(self, slot):
        """The absolute position an offset field points to."""
        return self._t.Indirect(self._offset(slot) + self._t.Pos)

    def scalar(self, slot, flags, default):
        o = self._offset(slot)
        return self._t.Get(flags, o + self._t.Pos) if o else default

    def string(self, slot):
        o = self._offset(slot)
        return self._t.String(o + self._t.Pos).decode("utf-8") if o else None

    def table(self, slot):
        return _Table(self._t.Bytes, self.target(slot)) if self.has(slot) else None

    def table_positions(self, slot):
        o = self._offset(slot)
        if not o:
            return []
        start = self._t.Vector(o)
        return [self._t.Indirect(start + 4 * i) for i in range(self._t.VectorLen(o))]

    def tables(self, slot):
        return [_Table(self._t.Bytes, p) for p in self.table_positions(slot)]

    def scalars(self, slot, flags):
        o = self._offset(slot)
        if not o:
            return []
        start = self._t.Vector(o)
        return [self._t.Get(flags, start + flags.bytewidth * i) for i in range(self._t.VectorLen(o))]

    def bytes(self, slot):
        o = self._offset(slot)
        if not o:
            return b""
        start = self._t.Vector(o)
        return bytes(self._t.Bytes[start : start + self._t.VectorLen(o)])
