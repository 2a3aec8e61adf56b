"""Finding and loading the models the commands start from: `.keras` files, run folders,
checkpoint folders, and the vocabulary that goes with them."""

import os
import zipfile

import keras
import tensorflow as tf

from keras_bert_impl import validation
from keras_bert_impl.checkpoints import convert_checkpoint
from keras_bert_impl.checkpoints.google_tf1 import holds_object_based_checkpoint
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.damaged_file_error import DamagedFileError, check_keras_archive
from keras_bert_impl.models import BertBackbone, merge_lora
from keras_bert_impl.models.model_copy import built_with_weights, copy_vocabulary
from keras_bert_impl.tokenization.vocabulary import read_vocabulary

# The config file that tells a checkpoint folder's format.
CHECKPOINT_FORMATS = {
    "bert_config.json": "google",
    "encoder_config.json": "model-garden",
    "config.json": "huggingface",
}


def checkpoint_format(path):
    """The importer format of a checkpoint folder, from the config file it holds; a
    bert_config.json beside a TF2 object-based checkpoint is Model Garden's TF2 release."""
    for name, fmt in CHECKPOINT_FORMATS.items():
        if os.path.exists(os.path.join(path, name)):
            if fmt == "google" and holds_object_based_checkpoint(path):
                return "model-garden"
            return fmt
    return None


def resolve_model_path(path, flag="--model"):
    """A .keras file, or a run folder of `kbert pretrain/finetune` (its model.keras)."""
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, "model.keras")):
        return os.path.join(path, "model.keras")
    if os.path.isfile(path) and path.endswith(".keras"):
        return path
    if os.path.isdir(path):
        found = "a folder without model.keras"
    else:
        found = "no such file" if not os.path.exists(path) else "not a .keras file"
    raise UsageError(
        f"{flag} must be a .keras file or a run folder of kbert pretrain/finetune (holding model.keras). "
        f"Received: {path!r} ({found})"
    )


def load_model(path, flag="--model"):
    """The model of a .keras file or run folder given as `flag`, computing in float32; a file that
    exists but is not a whole .keras model (truncated, another format, a corrupt entry) is a
    DamagedFileError that names it, where Keras says "File not found" or raises from deep in h5py."""
    model_path = resolve_model_path(path, flag=flag)
    check_keras_archive(model_path, flag=flag)
    try:
        model = keras.saving.load_model(model_path)
    except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile) as e:
        # A whole archive whose contents Keras refuses (an entry of another program's zip).
        raise DamagedFileError(
            model_path,
            f"a .keras archive that cannot be loaded ({type(e).__name__}: {_first_reason(e)[:300]})",
            flag=flag,
        ) from None
    from keras_bert_impl.inference.precision import with_precision

    # A run trained with --precision fp16 or bf16 saved its mixed policy, and would load
    # computing in it: every command starts from float32 (--precision then picks bf16 or int8).
    return with_precision(model, "fp32"), model_path


def _first_reason(error):
    """The line of a load error that says why: Keras' "A total of N objects could not be loaded.
    Example error message for object ...:" puts the object's own message on the lines after."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("A total of") and lines[0].endswith(":"):
        return lines[1]
    return lines[0] if lines else ""


def load_init(path, flag="--init"):
    """The starting model: a .keras file, a run folder, or a checkpoint folder
    (Google, Hugging Face or Model Garden, told apart by their config file), given as `flag`.

    Returns:
        (model, description): the loaded model (backbone or task model) on the host.
    """
    if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "model.keras")):
        fmt = checkpoint_format(path)
        if fmt is None:
            raise UsageError(
                f"{flag} {path!r} is a folder with neither model.keras (a kbert run folder) nor a checkpoint "
                f"config ({', '.join(CHECKPOINT_FORMATS)}). Pass a .keras file, a kbert run folder or a "
                "checkpoint folder."
            )
        try:
            model, report = convert_checkpoint(path, fmt)
        except (ValueError, OSError, tf.errors.OpError) as e:
            # A truncated safetensors file, a damaged TF checkpoint, a config that does not fit.
            message = " ".join(str(e).split())
            raise UsageError(f"{flag} {path}: the {fmt} checkpoint cannot be read: {message[:400]}") from None
        return model, f"{fmt} checkpoint {path} ({report.imported()})"
    return load_model(path, flag=flag)


def check_sequence_length(seq_len, backbone, flag="--seq-len", minimum=3):
    """`flag`'s length if `backbone` can take it (`validation.check_sequence_length`), else a UsageError."""
    try:
        return validation.check_sequence_length(flag, seq_len, backbone.max_sequence_length, minimum=minimum)
    except ValueError as e:
        raise UsageError(str(e)) from None


def run_sequence_length(seq_len, stored, backbone, flag="--seq-len"):
    """The length predict, evaluate, export and serve run a model at: `flag`'s value when given,
    else the run's training --seq-len (`stored`, its task file), else DEFAULT_SEQUENCE_LENGTH or the model's
    max_sequence_length if that is shorter; checked. `--seq-len 0` is refused, not taken for
    "not given" (None is)."""
    if seq_len is None:
        seq_len = stored.get("seq_len") or min(
            validation.DEFAULT_SEQUENCE_LENGTH, backbone.max_sequence_length
        )
    return check_sequence_length(seq_len, backbone, flag)


def backbone_of(model, flag="--init"):
    backbone = model if isinstance(model, BertBackbone) else getattr(model, "backbone", None)
    if not isinstance(backbone, BertBackbone):
        raise UsageError(f"{flag} must hold a keras_bert_impl BERT model. Received a {type(model).__name__}.")
    return backbone


def load_backbone(path, flag="--model"):
    """(backbone carrying its vocabulary, description) from anything `load_init` takes: the
    encoder of a task model, or a converted or pretrained backbone."""
    if not os.path.exists(path):
        raise UsageError(
            f"{flag} {path!r}: no such file or folder. Pass a .keras file, a kbert run folder or a "
            "checkpoint folder."
        )
    try:
        model, description = load_init(path, flag=flag)
    except (UsageError, DamagedFileError):
        raise
    except (ValueError, OSError, KeyError, zipfile.BadZipFile) as e:
        raise UsageError(
            f"{flag} {path!r} could not be loaded as a model ({type(e).__name__}: {str(e)[:200]}). "
            "Is it complete? Re-create it with kbert convert or finetune."
        ) from None
    backbone = backbone_of(model, flag=flag)
    if backbone.vocabulary is None:
        raise UsageError(
            f"{flag} {path!r} carries no vocabulary, so text cannot be tokenized for it: use a model written "
            "by kbert convert, pretrain or finetune, or a checkpoint folder with its vocab.txt."
        )
    return backbone, description


def vocabulary_for(backbone, vocab_path):
    """(vocabulary, lowercase) to tokenize with: --vocab if given (it must fit the embedding;
    lowercase None = read off the vocabulary), else the model's own."""
    if vocab_path:
        if not os.path.isfile(vocab_path):
            raise UsageError(f"--vocab {vocab_path!r}: no such file.")
        vocabulary = read_vocabulary(vocab_path)
        if len(vocabulary) != backbone.vocabulary_size:
            raise UsageError(
                f"--vocab {vocab_path} has {len(vocabulary)} tokens but the --init model's token embedding "
                f"has vocabulary_size={backbone.vocabulary_size}: the ids would not match the weights. Use "
                "the vocab.txt the model was trained with (or leave out --vocab: a converted or "
                "kbert-trained model carries its own)."
            )
        return vocabulary, None
    if backbone.vocabulary is None:
        raise UsageError(
            "The --init model carries no vocabulary: pass --vocab vocab.txt (the one its weights were "
            "trained with)."
        )
    return backbone.vocabulary, backbone.lowercase


def rebuilt_backbone(backbone, **overrides):
    """A fresh backbone with `backbone`'s weights and vocabulary, built in the current
    strategy scope and dtype policy (a loaded model keeps the policy it was saved with). A LoRA
    backbone (a --lora-rank run) comes back merged: a plain encoder, every weight trainable."""
    if backbone.lora_settings is not None:
        backbone = merge_lora(backbone)
    config = backbone.get_config()
    config.pop("dtype", None)
    config.pop("name", None)
    config.update(overrides)
    fresh = built_with_weights(lambda: BertBackbone.from_config(config), backbone.get_weights())
    copy_vocabulary(backbone, fresh)
    return fresh
