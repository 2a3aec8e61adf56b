"""A model of this library as a folder `transformers` loads offline with `from_pretrained`."""

import os

import keras

from keras_bert_impl.atomic_write import write_atomically, write_json_atomically, write_text_atomically
from keras_bert_impl_export.exporter import output_folder
from keras_bert_impl_export.huggingface.model_card import model_card
from keras_bert_impl_export.huggingface.tokenizer_files import tokenizer_files
from keras_bert_impl_export.huggingface.transformers_model import transformers_model

WEIGHTS = "model.safetensors"


def _model_and_run_folder(model):
    """A model object as it is; a path: a run folder (its model.keras) or a .keras file, loaded."""
    if not isinstance(model, (str, os.PathLike)):
        return model, None, None
    import keras_bert_impl.models  # noqa: F401  (registers our classes, so Keras can load them)

    path = os.fspath(model)
    if os.path.isdir(path):
        keras_path = os.path.join(path, "model.keras")
        if not os.path.isfile(keras_path):
            raise FileNotFoundError(
                f"model {path!r} is a folder without model.keras: pass a kbert run folder or a .keras file."
            )
        return keras.saving.load_model(keras_path), keras_path, path
    if not (os.path.isfile(path) and path.endswith(".keras")):
        raise FileNotFoundError(f"model {path!r} is not a .keras file or a kbert run folder.")
    return keras.saving.load_model(path), path, None


def export_huggingface(
    model, output, *, overwrite=False, run_folder=None, source=None, extra_files=None, notes=()
):
    """Writes `model` as a transformers folder: config.json, model.safetensors, the tokenizer
    (vocab.txt, tokenizer_config.json, special_tokens_map.json, tokenizer.json) and README.md.

    The folder is built beside `output` and renamed into place, so `output` appears whole or
    not at all; a model transformers cannot express as it is raises `NotExpressibleError`
    before anything is written.

    Args:
        model: a keras_bert_impl model (see `transformers_model`), a `.keras` file or a kbert
            run folder.
        output: the folder to create; an existing non-empty one is refused unless `overwrite`.
        overwrite: replace `output`.
        run_folder: the kbert run folder the model came from (its run.json and metrics.json
            go into the model card); found by itself when `model` is a run folder.
        source: the model's file name in the model card (default: the path given, or the class).
        extra_files: {relative path: JSON-able object} written into the folder too (the
            sentence-transformers modules: `export_sentence_transformers`).
        notes: lines added to the model card's notes.
    Returns:
        the `TransformersModel` written (class, config, tensor names, labels, notes).

    Example:
    >>> export_huggingface("runs/mr", "mr-transformers")  # doctest: +SKIP
    >>> transformers.BertForSequenceClassification.from_pretrained("mr-transformers")  # doctest: +SKIP
    """
    model, loaded_from, found_run = _model_and_run_folder(model)
    run_folder = run_folder or found_run
    described = transformers_model(model)  # refuses before anything is written
    described.notes.extend(notes)
    backbone = model if described.architecture == "BertModel" else model.backbone
    card = model_card(described, source or loaded_from or type(model).__name__, run_folder)
    with output_folder(output, overwrite) as work:
        write_transformers_folder(work, described, backbone, card)
        for name, value in (extra_files or {}).items():
            os.makedirs(os.path.dirname(os.path.join(work, name)), exist_ok=True)
            write_json_atomically(value, os.path.join(work, name), indent=2)
    return described


def write_transformers_folder(folder, described, backbone, card):
    """Writes the `TransformersModel` `described` into `folder` (made if missing): config.json,
    model.safetensors, the tokenizer files of `backbone`'s vocabulary and `card` as README.md."""
    from safetensors.numpy import save_file

    os.makedirs(folder, exist_ok=True)
    write_json_atomically(described.config, os.path.join(folder, "config.json"), indent=2)
    # "pt" is what transformers writes and checks for when it loads a safetensors file.
    write_atomically(
        os.path.join(folder, WEIGHTS),
        lambda tmp: save_file(described.tensors, tmp, metadata={"format": "pt"}),
    )
    files = tokenizer_files(backbone.vocabulary, backbone.lowercase, backbone.max_sequence_length)
    for name, text in files.items():
        write_text_atomically(text, os.path.join(folder, name))
    write_text_atomically(card, os.path.join(folder, "README.md"))
