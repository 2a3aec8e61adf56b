"""What an import did, tensor by tensor, and the error raised when it cannot be done."""

import json
import os


def read_json_file(path):
    """The JSON object (dict) in `path`; a file that is not JSON, or JSON that is not an object
    of fields, is a ValueError naming it (json's own message names only a line and column)."""
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(
                f"{path} is not valid JSON ({e}): fix the file, or copy it again from the checkpoint's "
                "source."
            ) from None
    if not isinstance(data, dict):
        kind = {list: "list", str: "string", type(None): "null", bool: "boolean"}.get(type(data), "number")
        raise ValueError(
            f"{path} holds a JSON {kind}, not an object of fields: is it the checkpoint's own config "
            "file? Copy it again from the checkpoint's source."
        )
    return data


def read_format_config(src, filename, what, format):
    """(config, its path) from the JSON file `filename` in `src`; a missing one is a
    FileNotFoundError that says `src` should be `what` (and names the format it looks like)."""
    path = os.path.join(src, filename)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"No {filename} in {src}: point SRC at {what}." + other_format_hint(src, format)
        )
    return read_json_file(path), path


# BertBackbone's arguments and the bert_config.json fields that hold them (transformers' BertConfig
# kept the names): a name is required, a (name, default) pair optional.
BERT_CONFIG_ARGUMENTS = {
    "vocabulary_size": "vocab_size",
    "hidden_dim": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "intermediate_dim": "intermediate_size",
    "max_sequence_length": "max_position_embeddings",
    "num_segments": "type_vocab_size",
    "dropout": ("hidden_dropout_prob", 0.1),
    "attention_dropout": ("attention_probs_dropout_prob", 0.1),
    "initializer_range": ("initializer_range", 0.02),
}
BERT_CONFIG_REQUIRED = tuple(field for field in BERT_CONFIG_ARGUMENTS.values() if isinstance(field, str))
BERT_CONFIG_OPTIONAL = tuple(
    field[0] for field in BERT_CONFIG_ARGUMENTS.values() if not isinstance(field, str)
)
# What each numeric field must hold (check_config_numbers' kinds).
BERT_CONFIG_NUMBERS = {
    **{field: "size" for field in BERT_CONFIG_REQUIRED},
    "hidden_dropout_prob": "probability",
    "attention_probs_dropout_prob": "probability",
    "initializer_range": "positive",
}


def backbone_kwargs_from_fields(config, fields, **given):
    """BertBackbone arguments read from a checkpoint's `config` through `fields` (argument -> field,
    or -> (field, default) for an optional one), with the `given` ones that no field holds."""
    kwargs = {
        argument: config[field] if isinstance(field, str) else config.get(*field)
        for argument, field in fields.items()
    }
    return {**kwargs, **given}


# What a config's numeric fields must hold, by kind: (test, how it is said).
_NUMBER_KINDS = {
    "size": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a positive integer"),
    "probability": (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "epsilon": (lambda v: _is_number(v) and 0 < v < 1, "a number in (0, 1)"),
    "positive": (lambda v: _is_number(v) and v > 0, "a positive number"),
}


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_config_numbers(config, source, kinds):
    """A ValueError naming `source` and the field for the first of `kinds` ({field: "size",
    "probability", "epsilon" or "positive"}) whose value in `config` is of another kind: said in
    the config's words, before the model is built (a string epsilon failed inside a layer's call)."""
    for field, kind in kinds.items():
        test, said = _NUMBER_KINDS[kind]
        if field in config and not test(config[field]):
            raise ValueError(
                f"{source}: {field}={config[field]!r} must be {said}. Fix the file, or copy it again from "
                "the checkpoint's source."
            )


# Each format's telling files, and what they mean (--format value, the words for it).
_FORMAT_FILES = (
    (("config.json", "model.safetensors"), "huggingface", "a Hugging Face folder"),
    (("config.json", "model.safetensors.index.json"), "huggingface", "a sharded Hugging Face folder"),
    (("bert_config.json",), "google", "Google's release"),
    (("encoder_config.json",), "model-garden", "a Model Garden encoder"),
)


def other_format_hint(src, format):
    """' It holds ..., <what>: use --format X.' when `src` looks like another format's folder, else ''."""
    for files, other, what in _FORMAT_FILES:
        if other != format and all(os.path.exists(os.path.join(src, name)) for name in files):
            return f" It holds {' and '.join(files)}, {what}: use --format {other}."
    return ""


class CheckpointMismatchError(ValueError):
    """Raised before anything is assigned when a checkpoint does not fit the model."""

    def __init__(self, report):
        self.report = report
        lines = [f"Checkpoint {report.source!r} does not fit the model; nothing was loaded."]
        if report.missing:
            lines.append(
                f"Missing from the checkpoint ({len(report.missing)}): " + _first(report.missing) + "."
            )
        if report.unplaced:
            lines.append(
                f"Encoder tensors the model has no place for ({len(report.unplaced)}): "
                + _first(report.unplaced)
                + ": the config describes a smaller encoder than the checkpoint's."
            )
        if report.shape_mismatch:
            lines.append(
                f"Shape mismatch ({len(report.shape_mismatch)}): "
                + _first(
                    [f"{name} checkpoint {src} vs model {dst}" for name, src, dst in report.shape_mismatch]
                )
                + "."
            )
        lines.append(
            "Check that the config file belongs to these weights and that --format names the checkpoint's "
            "format."
        )
        super().__init__("\n".join(lines))


class ImportReport:
    """Per-tensor outcome of an import.

    Attributes:
        source: path or description of the checkpoint.
        mapped: list of (checkpoint name, model variable path, shape): the name as the source
            file has it.
        missing: model tensors (in Google's naming) the checkpoint lacks.
        unexpected: checkpoint tensors the model has no place for (heads it does not have);
            one of the encoder's own (`unplaced`) fails the import.
        ignored: checkpoint tensors skipped on purpose (optimizer slots, buffers), with the reason.
        shape_mismatch: list of (name, checkpoint shape, model shape).
        initialised: model tensors the checkpoint does not have and may lack, left at their
            initialisation: the pooler of a checkpoint saved from a token-level head, the NSP
            head of one saved from BertForMaskedLM, the MLM head of BertForNextSentencePrediction's.
    """

    def __init__(self, source):
        self.source = source
        self.mapped = []
        self.missing = []
        self.unexpected = []
        self.ignored = []
        self.shape_mismatch = []
        self.initialised = []

    @property
    def unplaced(self):
        """Unexpected tensors of the encoder itself (Google's bert/ names): a checkpoint deeper or
        wider than its config, which must not load as a smaller model."""
        return [name for name in self.unexpected if name.startswith("bert/")]

    @property
    def ok(self):
        return not self.missing and not self.shape_mismatch and not self.unplaced

    def name_sources(self, origin):
        """Names `mapped` and `unexpected` tensors as the source file does, through `origin`
        ({google_name: source name}): an importer that translates names to Google's matches
        them under those, but the report speaks of the file it names."""
        self.mapped = [(origin.get(c, c), m, s) for c, m, s in self.mapped]
        self.unexpected = sorted(origin.get(name, name) for name in self.unexpected)

    def to_dict(self):
        return {
            "source": self.source,
            "mapped": [{"checkpoint": c, "model": m, "shape": list(s)} for c, m, s in self.mapped],
            "missing": self.missing,
            "unexpected": self.unexpected,
            "ignored": [{"checkpoint": n, "reason": r} for n, r in self.ignored],
            "shape_mismatch": [
                {"name": n, "checkpoint": list(a), "model": list(b)} for n, a, b in self.shape_mismatch
            ],
            "initialised": self.initialised,
        }

    def to_json(self):
        return json.dumps(self.to_dict(), indent=2)

    def imported(self):
        """What was imported, in a few words: "103 tensors imported, 22,713,216 values"."""
        return f"{len(self.mapped)} tensors imported, {sum(_size(s) for _, _, s in self.mapped):,} values"

    def summary(self, verbose=False):
        lines = [
            f"Import report for {self.source}",
            f"  mapped:         {len(self.mapped)} tensors, "
            f"{sum(_size(s) for _, _, s in self.mapped):,} values",
            f"  missing:        {len(self.missing)}",
            f"  shape mismatch: {len(self.shape_mismatch)}",
            f"  unexpected:     {len(self.unexpected)}"
            + (f" ({', '.join(self.unexpected)})" if self.unexpected else ""),
            f"  ignored:        {len(self.ignored)}"
            + (
                f" ({', '.join(f'{n}: {r}' for n, r in self.ignored[:5])}"
                f"{' ...' if len(self.ignored) > 5 else ''})"
                if self.ignored
                else ""
            ),
        ]
        if self.initialised:
            outputs = sorted({_OUTPUT_OF[name.split("/")[1]] for name in self.initialised})
            lines.append(
                f"  initialised:    {len(self.initialised)} ({', '.join(self.initialised)}: not in the "
                "checkpoint, saved from a model without them; left at their initialisation, as transformers "
                f"does: fine-tune before using {' or '.join(outputs)})"
            )
        if verbose:
            lines += [f"    {c} -> {m} {tuple(s)}" for c, m, s in self.mapped]
        return "\n".join(lines)

    def __repr__(self):
        return self.summary()


def _first(items, count=8):
    """The first `count` items, and how many more (the error's `report` holds them all): a config
    of the wrong width mismatches every tensor, 97 of MiniLM's in an 8 KB line."""
    shown = ", ".join(items[:count])
    return shown + (f", ... and {len(items) - count} more" if len(items) > count else "")


# The model output that an initialised part's tensors (by their second name component) feed.
_OUTPUT_OF = {"pooler": "pooled_output", "predictions": "mlm_logits", "seq_relationship": "nsp_logits"}


def _size(shape):
    size = 1
    for d in shape:
        size *= int(d)
    return size
