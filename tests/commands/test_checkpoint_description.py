"""How a kbert command names a checkpoint folder it starts from (`kbert finetune --init
data/minilm`, `kbert embed --model data/minilm`): the format, the path and what was imported.
It read "huggingface checkpoint data/minilm (Import report for data/minilm/model.safetensors)":
the import report's title line, which says the path a second time and nothing else."""

import os

from keras_bert_impl.commands.model_files import load_init


def test_a_checkpoint_folder_is_named_by_what_was_imported(data_dir):
    path = os.path.join(data_dir, "minilm")
    _, description = load_init(path)
    assert description == f"huggingface checkpoint {path} (103 tensors imported, 22,713,216 values)"
