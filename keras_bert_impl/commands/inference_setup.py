"""What `kbert predict` and `kbert evaluate` both do before they read any text: load the
model, find its task and length, check it carries a vocabulary, and ask `ForwardResolver` what
runs at --precision (auto: the precision chosen for this CPU and model) and --runtime, or refuse
in one line."""

import os
import sys
from typing import NamedTuple

from keras_bert_impl.commands import task_data
from keras_bert_impl.commands.errors import UsageError


class InferenceSetup(NamedTuple):
    # The task model: a classifier as loaded (TextPredictor runs its precision), else in --precision.
    model: object
    model_path: str  # the .keras file that was loaded
    stored: dict  # the run folder's task.json ({} for a bare .keras)
    task: str  # classification, pair, multilabel, tagging or squad
    seq_len: int  # checked against the model's max_sequence_length
    precision: str  # fp32, bf16 or int8: --precision, or what auto chose
    runtime: str  # tensorflow or litert: --runtime, or the precision's own
    note: object = None  # the resolver's line for the user (auto's choice, a slower precision), or None


def resolve_flags(args, model, task):
    """`ForwardResolver` of `model` at `args.precision` and `args.runtime`, its refusal a
    UsageError and its note (auto's choice, an explicit precision expected to be slower here)
    one line on stderr."""
    from keras_bert_impl.inference.forward_resolver import ForwardResolver

    try:
        resolved = ForwardResolver(
            model,
            args.precision,
            args.runtime,
            task=task,
            precision_name="--precision",
            runtime_name="--runtime",
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
    if resolved.note:
        print(f"kbert {args.command}: {resolved.note}", file=sys.stderr, flush=True)
    return resolved


def load_for_inference(args, has_text_b):
    """`args.model`, `args.seq_len`, `args.precision`, `args.runtime` and `args.batch_size` checked
    and loaded; `has_text_b`: the command was given second texts (a pair model either way when its
    run folder says so)."""
    from keras_bert_impl.commands.model_files import load_model, run_sequence_length
    from keras_bert_impl.precision_choice import INT8_TASKS

    model, model_path = load_model(args.model)
    stored = task_data.read_task_file(os.path.dirname(model_path)) or {}
    try:
        task = task_data.task_of_model(model, has_text_b=has_text_b or stored.get("task") == "pair")
    except ValueError as e:
        raise UsageError(str(e)) from None
    backbone = model.backbone
    seq_len = run_sequence_length(args.seq_len, stored, backbone)
    if backbone.vocabulary is None:
        raise UsageError(
            f"{model_path} carries no vocabulary; it was not written by kbert finetune or convert."
        )
    resolved = resolve_flags(args, model, task)
    # TextPredictor builds a classifier's forward from the resolved precision and runtime itself.
    in_precision = model if task in INT8_TASKS else resolved.model_in_precision()
    return InferenceSetup(
        in_precision, model_path, stored, task, seq_len, resolved.precision, resolved.runtime, resolved.note
    )


def text_predictor(setup, batch_size):
    """The `TextPredictor` of a classifier `setup` (its resolved precision and runtime); a model
    that does not convert for LiteRT is one line (`ForwardResolver.forward` words it)."""
    from keras_bert_impl.conversion.tflite_converter import ConversionError
    from keras_bert_impl.inference import TextPredictor

    try:
        return TextPredictor(
            setup.model,
            sequence_length=setup.seq_len,
            batch_size=batch_size,
            precision=setup.precision,
            runtime=setup.runtime,
        )
    except ConversionError as e:
        raise UsageError(str(e)) from None
