"""LoRA classifiers of one base served as separate models over one backbone in memory.

Each adapter's SavedModels are written as `kbert export` writes its merged model (NAME and
NAME_ids, exporter.py's layout), for their signatures and metadata only: `ServableModel`
reads their saved_model.pb and leaves their variables on disk. Every call runs the same
tokenization and post-processing (`ExportSignatures`, as `precision_export`'s LiteRT calls)
around the adapter's forward in a `LoraAdapterBank`, which holds the base backbone once and
per adapter its LoRA matrices and head.
"""

import os

from keras_bert_impl.models import BertClassifier, LoraAdapterBank, merge_lora
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
            log(f"exporting {name!r} (its merged model's SavedModels, for their signatures)")
            folder = os.path.join(output, name)
            export_model(
                merge_lora(model),
                folder,
                name=name,
                sequence_length=seq_len,
                pair=pair,
                formats=("saved_model",),
                log=log,
            )
            served.append((name, seq_len, pair, folder))
            yield model

    bank = LoraAdapterBank(classifiers())
    log(f"{len(bank)} adapters over one backbone")
    servables = []
    for index, (name, seq_len, pair, folder) in enumerate(served):
        # The adapter's head on the shared backbone: the signatures' labels, outputs and id checks.
        head = BertClassifier(bank.backbone, **bank.heads[index]["config"])
        functions = servable_functions(head, name, seq_len, pair, _forward(bank, index))
        for model_name, version, path in find_servables(folder):
            servables.append(
                ServableModel(model_name, version, path, functions=functions[model_name], load=False)
            )
    return servables


def _forward(bank, index):
    def forward(*ids):  # token_ids, segment_ids, padding_mask [B, S]
        (outputs,) = bank.run([(index, dict(zip(MODEL_ID_INPUTS, ids)))])
        return outputs

    return forward
