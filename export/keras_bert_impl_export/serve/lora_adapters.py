"""LoRA classifiers of one base served as separate models over one backbone in memory.

Each adapter's SavedModels (NAME and NAME_ids, exporter.py's layout) are written from its head
on the shared base backbone, for their signatures and metadata only, which are its merged
export's (they depend on the head and the vocabulary, not on the weights): `ServableModel`
reads their saved_model.pb and leaves their variables on disk. Every call runs the same
tokenization and post-processing (`ExportSignatures`, as `precision_export`'s LiteRT calls)
around the adapter's forward in a `LoraAdapterBank`, which holds the base backbone once and
per adapter its LoRA matrices and head.

A batch may mix them: requests to different adapters' signatures of one kind (raw text or ids)
with the same inputs and outputs (`AdapterBatches.group`) share a batch key, so the server's
dynamic batcher merges them; each adapter's part runs its own tokenization and
post-processing, and their forwards meet in one `LoraAdapterBank.run`: one backbone call.
"""

import concurrent.futures
import gc
import os
import threading

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.models import BertClassifier, LoraAdapterBank
from keras_bert_impl.tensor_names import MODEL_ID_INPUTS
from keras_bert_impl_export.exporter import export_model
from keras_bert_impl_export.precision_export import servable_functions
from keras_bert_impl_export.serve.servable_model import ServableModel, find_servables


def adapter_servables(runs, output, log):
    """[ServableModel] of every LoRA classifier in `runs`, over one `LoraAdapterBank`.

    Args:
        runs: an iterable of (name, LoRA BertClassifier, sequence length, pair), read once:
            a generator loading each in turn keeps one full model in memory at a time.
        output: a folder to create, for the SavedModels (output/NAME/serving/...).
        log: where the progress lines go.

    Raises ValueError (one line) where the classifiers are not of one base (LoraAdapterBank's),
    and what `export_model` raises."""
    served = []

    def classifiers():
        for name, model, seq_len, pair in runs:
            served.append((name, seq_len, pair, os.path.join(output, name)))
            yield model
            # Gone before the next run loads: one full model in memory at a time.
            del model
            gc.collect()

    bank = LoraAdapterBank(classifiers())
    log(f"{len(bank)} adapters over one backbone")
    batches = AdapterBatches(bank)
    servables = []
    for index, (name, seq_len, pair, folder) in enumerate(served):
        # The adapter's head on the shared backbone: the signatures' labels, outputs and id checks,
        # and the SavedModels written for their signatures and metadata (what its merged model's
        # export holds but the weights, which are never loaded), with no copy of the backbone.
        head = BertClassifier(bank.backbone, **bank.heads[index]["config"])
        head.output_dense.kernel.assign(bank.heads[index]["kernel"])
        head.output_dense.bias.assign(bank.heads[index]["bias"])
        log(f"exporting {name!r}'s signatures")
        export_model(
            head, folder, name=name, sequence_length=seq_len, pair=pair, formats=("saved_model",), log=log
        )
        keras.utils.clear_session()  # the export's traces
        functions = servable_functions(head, name, seq_len, pair, batches.forward(index))
        for model_name, version, path in find_servables(folder):
            servable = ServableModel(model_name, version, path, functions=functions[model_name], load=False)
            batches.add(servable, index)
            servables.append(servable)
    return servables


# The batch column naming each row's servable (never a SavedModel input: theirs are names).
_SERVABLE_ROWS = "__servable__"


class AdapterBatches:
    """Runs batches that mix requests to several adapters' servables with one backbone call.

    `add` gives each servable a `batch_group` (the server keys its batches by it in place of
    the model name) and `inputs` tags a request's rows with their servable; `run` splits a batch
    by servable, runs each part's own signature function in a thread of its own, and meets their
    forwards (`forward(adapter)`, passed to `servable_functions`) in one `LoraAdapterBank.run`."""

    def __init__(self, bank):
        self.bank = bank
        # One graph for every batch size and width (run eagerly, MiniLM's backbone took 1.5 times
        # as long; a trace per shape would stall the requests that meet a new one).
        ids = tf.TensorSpec([None, None], tf.int32)
        bank.forward = tf.function(
            bank.forward,
            input_signature=({name: ids for name in MODEL_ID_INPUTS}, tf.TensorSpec([None], tf.int32)),
        )
        self.servables = []
        self._meeting = threading.local()  # the _Meeting of the batch a thread runs a part of

    def add(self, servable, adapter):
        """Makes `servable` (adapter `adapter`'s) batch with the others of its kind and outputs."""
        kind = ",".join(
            f"{name}:{spec.dtype.name}{spec.shape}"
            for signature in sorted(servable.signatures)
            for group in ("inputs", "outputs")
            for name, spec in sorted(servable.signatures[signature][group].items())
        )
        servable.batch_group = f"lora-adapters[{kind}]"
        servable.batch_index = len(self.servables)
        servable.batch_runner = self
        self.servables.append((servable, adapter))

    def inputs(self, servable, inputs, rows):
        """A request's inputs with the column naming its servable on every row."""
        return {**inputs, _SERVABLE_ROWS: np.full(rows, servable.batch_index, "int32")}

    def forward(self, adapter):
        """The id forward of `adapter`'s signatures: alone, its own bank call; in a mixed batch,
        its part of the batch's one call."""

        def forward(*ids):  # token_ids, segment_ids, padding_mask [B, S]
            meeting = getattr(self._meeting, "current", None)
            if meeting is None:
                (outputs,) = self.bank.run([(adapter, dict(zip(MODEL_ID_INPUTS, ids)))])
                return outputs
            return meeting.forward(adapter, ids)

        return forward

    def run(self, signature, inputs):
        """A batch {input: [B, ...]} tagged by `inputs`; its outputs {output: [B, ...]} in its
        rows' order."""
        inputs = dict(inputs)
        rows = inputs.pop(_SERVABLE_ROWS)
        parts = [(index, np.flatnonzero(rows == index)) for index in np.unique(rows)]
        meeting = _Meeting(self.bank, len(parts))

        def part(index, where):
            self._meeting.current = meeting
            try:
                servable = self.servables[index][0]
                return servable.run(signature, {name: value[where] for name, value in inputs.items()})
            finally:
                meeting.leave()
                self._meeting.current = None

        with concurrent.futures.ThreadPoolExecutor(len(parts)) as pool:
            answers = [pool.submit(part, index, where) for index, where in parts]
        outputs = {}
        for (_, where), answer in zip(parts, answers):
            for name, value in answer.result().items():
                if name not in outputs:
                    outputs[name] = np.empty((len(rows), *value.shape[1:]), value.dtype)
                outputs[name][where] = value
        return outputs


class _Meeting:
    """Where the forwards of one mixed batch's parts wait for each other: the last to arrive
    runs them all as one `LoraAdapterBank.run`, padded to the widest part's columns (masked
    columns change no answer of a row that reads any token; a row that reads none arrives at
    its signature's full width, the widest). A part that fails before its forward leaves, so
    the others do not wait for it."""

    def __init__(self, bank, parts):
        self.bank, self.expected, self.requests = bank, parts, []
        self.arrived = set()  # the threads whose part reached its forward
        self.answers = self.error = None
        self.condition = threading.Condition()

    def forward(self, adapter, ids):
        with self.condition:
            slot = len(self.requests)
            self.requests.append((adapter, ids))
            self.arrived.add(threading.get_ident())
            self._run_if_complete()
            self.condition.wait_for(lambda: self.answers is not None or self.error is not None)
            if self.error is not None:
                raise self.error
            return self.answers[slot]

    def leave(self):
        """Called when a part ends: one that never reached its forward stops being waited for."""
        with self.condition:
            if threading.get_ident() not in self.arrived:
                self.expected -= 1
                self._run_if_complete()

    def _run_if_complete(self):
        if self.answers is not None or self.error is not None or len(self.requests) < self.expected:
            return
        if self.requests:
            width = max(ids[0].shape[1] for _, ids in self.requests)
            try:
                self.answers = self.bank.run(
                    [
                        (adapter, {n: _pad(x, width) for n, x in zip(MODEL_ID_INPUTS, ids)})
                        for adapter, ids in self.requests
                    ]
                )
            except Exception as e:  # every part hears it; the batcher then runs each request alone
                self.error = e
        self.condition.notify_all()


def _pad(ids, width):
    ids = np.asarray(ids)
    return np.pad(ids, ((0, 0), (0, width - ids.shape[1])))
