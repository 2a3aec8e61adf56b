"""What `kbert predict` and `kbert evaluate` both do before they read any text: load the
model, find its task and length, check it carries a vocabulary, put it in --precision (auto:
the precision chosen for this CPU and task) and pick its --runtime."""

import os
from typing import NamedTuple

from keras_bert_impl.commands import task_data
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.precision_flag import model_in_precision, precision_for, runtime_for


class InferenceSetup(NamedTuple):
    model: object  # the task model, in --precision (TextPredictor makes a classifier's copy itself)
    model_path: str  # the .keras file that was loaded
    stored: dict  # the run folder's task.json ({} for a bare .keras)
    task: str  # classification, pair, multilabel, tagging or squad
    seq_len: int  # checked against the model's max_sequence_length
    precision: str  # fp32, bf16 or int8: --precision, or what auto chose
    runtime: str  # tensorflow or litert: --runtime, or the precision's own


def load_for_inference(args, has_text_b):
    """`args.model`, `args.seq_len`, `args.precision`, `args.runtime` and `args.batch_size` checked and loaded;
    `has_text_b`: the command was given second texts (a pair model either way when its run
    folder says so)."""
    from keras_bert_impl.commands.model_files import load_model, run_sequence_length

    if args.batch_size < 1:
        raise UsageError(f"--batch-size must be a positive integer. Received: {args.batch_size}")
    model, model_path = load_model(args.model)
    stored = task_data.read_task_file(os.path.dirname(model_path)) or {}
    try:
        task = task_data.task_of_model(model, has_text_b=has_text_b or stored.get("task") == "pair")
    except ValueError as e:
        raise UsageError(str(e)) from None
    backbone = model.backbone
    seq_len = run_sequence_length(args.seq_len, stored, backbone)
    if backbone.vocabulary is None:
        raise UsageError(f"{model_path} carries no vocabulary; it was not written by kbert finetune or convert.")
    from keras_bert_impl.models.quantized_layers import quantization_modes

    quantized = quantization_modes(model)
    precision = precision_for(args.precision, task, args.command, quantized=quantized)
    runtime = runtime_for(args.runtime, args.precision, precision, task, quantized)
    return InferenceSetup(model_in_precision(model, precision, task), model_path, stored, task, seq_len, precision,
                          runtime)
