"""A sentence embedder of this library as a folder `sentence-transformers` loads offline with
`SentenceTransformer(folder)`: the encoder as a transformers BertModel folder
(`export_huggingface`) plus the modules that pool and normalise its output, laid out as the
real all-MiniLM-L6-v2 is (modules.json, sentence_bert_config.json, 1_Pooling/config.json,
2_Normalize)."""

import keras_bert_impl as kb
from keras_bert_impl.validation import check_sequence_length
from keras_bert_impl_export.huggingface.export_huggingface import _model_and_run_folder, export_huggingface
from keras_bert_impl_export.huggingface.not_expressible_error import NotExpressibleError

# Our pooling -> sentence-transformers' Pooling mode (its config's pooling_mode_* keys).
POOLING_MODES = {"cls": "cls_token", "mean": "mean_tokens", "max": "max_tokens"}
# Every pooling_mode_* key of the real all-MiniLM-L6-v2's 1_Pooling/config.json.
ALL_MODES = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens")


def _embedder_settings(model, pooling, normalize):
    """(backbone, pooling, normalize) of a BertBackbone (pooling, normalize given) or a
    BertEmbedder (its own; a different pooling or normalize given is refused)."""
    if isinstance(model, kb.BertBackbone):
        # The embedder checks the pooling (and is what `kbert export`'s other embedder files are).
        model = kb.BertEmbedder(
            model, pooling=pooling or "mean", normalize=True if normalize is None else normalize
        )
        return model.backbone, model.pooling, model.normalize
    if not isinstance(model, kb.BertEmbedder):
        raise NotExpressibleError(
            f"a {type(model).__name__} is not a sentence embedder: pass a BertEmbedder or a BertBackbone "
            "(with the pooling to apply); a classifier or tagger goes to --formats huggingface."
        )
    if model.layer_index not in (-1, model.backbone.num_layers):
        raise NotExpressibleError(
            f"the embedder pools layer {model.layer_index}; sentence-transformers' Transformer module gives "
            "the last layer: pool the last layer (layer_index=-1) to export it."
        )
    for name, given, own in (("pooling", pooling, model.pooling), ("normalize", normalize, model.normalize)):
        if given is not None and given != own:
            raise ValueError(
                f"{name}={given!r} differs from the embedder's own {name}={own!r}: leave {name} out."
            )
    return model.backbone, model.pooling, model.normalize


def export_sentence_transformers(
    model, output, *, pooling=None, normalize=None, max_seq_length=128, overwrite=False, source=None
):
    """Writes a sentence embedder as a sentence-transformers folder whose `encode` gives the
    vectors `kbert embed` gives at the same settings (the first `max_seq_length` wordpieces,
    [CLS] and [SEP] included).

    Args:
        model: a `BertEmbedder` (its pooling and normalisation are used), a `BertBackbone`
            (pooled by `pooling`, default "mean", normalised if `normalize`), a `.keras`
            file of either, or a kbert run folder of a backbone.
        output: the folder to create; an existing non-empty one is refused unless `overwrite`.
        pooling: "cls", "mean" or "max" for a backbone.
        normalize: L2-normalise the vectors (a backbone; default True, as `kbert export`'s
            other embedder files; `kbert embed` normalises with --normalize).
        max_seq_length: wordpieces per text (sentence_bert_config.json), at most the model's
            positions; `kbert embed`'s --seq-len default is 128.
        overwrite, source: as for `export_huggingface`.
    Returns:
        the `TransformersModel` of the encoder (a BertModel).

    Example:
    >>> export_sentence_transformers("minilm.keras", "minilm-st", normalize=True)  # doctest: +SKIP
    >>> SentenceTransformer("minilm-st").encode(["a gripping film"])  # doctest: +SKIP
    """
    if normalize is not None and not isinstance(normalize, bool):
        raise TypeError(f"normalize must be True, False or None. Received: normalize={normalize!r}")
    model, loaded_from, _ = _model_and_run_folder(model)
    backbone, pooling, normalize = _embedder_settings(model, pooling, normalize)
    check_sequence_length("max_seq_length", max_seq_length, backbone.max_sequence_length)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append(
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        )
    pooling_config = {"word_embedding_dimension": backbone.hidden_dim}
    pooling_config.update({f"pooling_mode_{mode}": mode == POOLING_MODES[pooling] for mode in ALL_MODES})
    files = {
        "modules.json": modules,
        # The tokenizer lowercases by itself (tokenizer.json's normalizer): do_lower_case stays false.
        "sentence_bert_config.json": {"max_seq_length": max_seq_length, "do_lower_case": False},
        "1_Pooling/config.json": pooling_config,
    }
    note = (
        f"A sentence-transformers folder too: SentenceTransformer(folder).encode(texts) gives {pooling} "
        f"pooling of the last layer over {max_seq_length} "
        f"wordpieces{', L2-normalised' if normalize else ''}, as `kbert embed` does."
    )
    return export_huggingface(
        backbone,
        output,
        overwrite=overwrite,
        source=source or loaded_from or type(model).__name__,
        extra_files=files,
        notes=[note],
    )
