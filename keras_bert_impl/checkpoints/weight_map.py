"""Our variables under Google's original TF1 names, the common language of the importers.

Every importer translates its source into a dict {google_name: numpy array in
Google's layout} and hands it to `assign_weights`, which checks everything
first and assigns only when the whole checkpoint fits.
"""

import numpy as np

from keras_bert_impl.checkpoints.import_report import CheckpointMismatchError, ImportReport


def _dense(prefix, layer):
    return {f"{prefix}/kernel": (layer.kernel, False), f"{prefix}/bias": (layer.bias, False)}


def _layer_norm(prefix, layer):
    return {f"{prefix}/gamma": (layer.gamma, False), f"{prefix}/beta": (layer.beta, False)}


def backbone_variables(backbone):
    """{google_name: (variable, transpose)} for a BertBackbone."""
    emb = backbone.embeddings
    names = {
        "bert/embeddings/word_embeddings": (emb.token_embedding.embeddings, False),
        "bert/embeddings/token_type_embeddings": (emb.segment_embedding.embeddings, False),
        **_layer_norm("bert/embeddings/LayerNorm", emb.layer_norm),
        **_dense("bert/pooler/dense", backbone.pooler.dense),
    }
    if emb.position_embedding == "learned":
        names["bert/embeddings/position_embeddings"] = (emb.position_embeddings, False)
    for i, block in enumerate(backbone.transformer_layers):
        p = f"bert/encoder/layer_{i}"
        att = block.attention
        names.update(_dense(f"{p}/attention/self/query", att.query_dense))
        names.update(_dense(f"{p}/attention/self/key", att.key_dense))
        names.update(_dense(f"{p}/attention/self/value", att.value_dense))
        names.update(_dense(f"{p}/attention/output/dense", att.output_dense))
        names.update(_layer_norm(f"{p}/attention/output/LayerNorm", block.attention_layer_norm))
        names.update(_dense(f"{p}/intermediate/dense", block.feed_forward.intermediate_dense))
        names.update(_dense(f"{p}/output/dense", block.feed_forward.output_dense))
        names.update(_layer_norm(f"{p}/output/LayerNorm", block.output_layer_norm))
    return names


POOLER_NAMES = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")
HEAD_NAMES = (
    "cls/predictions/transform/dense/kernel",
    "cls/predictions/transform/dense/bias",
    "cls/predictions/transform/LayerNorm/gamma",
    "cls/predictions/transform/LayerNorm/beta",
    "cls/predictions/output_bias",
    "cls/seq_relationship/output_weights",
    "cls/seq_relationship/output_bias",
)

MLM_HEAD_NAMES, NSP_HEAD_NAMES = HEAD_NAMES[:5], HEAD_NAMES[5:]
# Parts a checkpoint may lack whole, left at their initialisation as transformers leaves them:
# its token-level heads (BertForTokenClassification, ForMaskedLM, ForQuestionAnswering) save no
# pooler, nor does our own Hugging Face export of them; BertForMaskedLM saves the MLM head
# without the NSP head, BertForNextSentencePrediction the NSP head without the MLM head. Half
# a part is a checkpoint that does not fit.
OPTIONAL_PARTS = (POOLER_NAMES, MLM_HEAD_NAMES, NSP_HEAD_NAMES)


def pretrainer_variables(pretrainer):
    """Backbone names plus Google's `cls/...` pretraining heads."""
    mlm, nsp = pretrainer.masked_lm_head, pretrainer.next_sentence_head
    names = backbone_variables(pretrainer.backbone)
    names.update(_dense("cls/predictions/transform/dense", mlm.dense))
    names.update(_layer_norm("cls/predictions/transform/LayerNorm", mlm.layer_norm))
    names["cls/predictions/output_bias"] = (mlm.output_bias, False)
    # Google stores the NSP weights as [2, H]; a Keras Dense kernel is [H, 2].
    names["cls/seq_relationship/output_weights"] = (nsp.dense.kernel, True)
    names["cls/seq_relationship/output_bias"] = (nsp.dense.bias, False)
    return names


def assign_weights(targets, arrays, source, ignored=()):
    """Checks `arrays` ({google_name: array}) against `targets` and assigns them all,
    or raises CheckpointMismatchError having assigned nothing.

    Args:
        targets: {google_name: (variable, transpose)} from backbone_variables/pretrainer_variables.
        arrays: {google_name: numpy array} translated from the source.
        source: str, for the report.
        ignored: list of (source_name, reason) the translator skipped on purpose.
    Returns:
        ImportReport.
    """
    report = ImportReport(source)
    report.ignored = list(ignored)
    ready = []
    for name, (variable, transpose) in targets.items():
        if name not in arrays:
            report.missing.append(name)
            continue
        value = np.asarray(arrays[name])
        value = value.T if transpose else value
        # float16, float32, float64, and bfloat16 (ml_dtypes' numpy kind "V").
        if value.dtype.kind != "f" and value.dtype.name != "bfloat16":
            raise ValueError(
                f"{source}: {name} holds {value.dtype.name} values where the model holds floats: a "
                "quantized checkpoint cannot be imported (its integers are not the weights without their "
                "scales). Use the float checkpoint."
            )
        if tuple(value.shape) != tuple(variable.shape):
            report.shape_mismatch.append((name, tuple(value.shape), tuple(variable.shape)))
            continue
        ready.append((name, variable, value))
    report.unexpected = sorted(set(arrays) - set(targets))
    for part in OPTIONAL_PARTS:
        if set(part) <= set(report.missing):
            report.missing = [name for name in report.missing if name not in part]
            report.initialised += list(part)
    if not report.ok:
        raise CheckpointMismatchError(report)
    for name, variable, value in ready:
        variable.assign(value.astype(variable.dtype))
        report.mapped.append((name, variable.path, tuple(value.shape)))
    return report


def read_checkpoint_vocabulary(vocab_path, vocabulary_size, config_path, field="vocab_size"):
    """The checkpoint's vocab.txt, which must have the config's `field` (the token embedding's
    rows) tokens: said here naming both files, not by BertBackbone.set_vocabulary naming neither."""
    from keras_bert_impl.tokenization.vocabulary import read_vocabulary

    vocabulary = read_vocabulary(vocab_path)
    if len(vocabulary) != vocabulary_size:
        raise ValueError(
            f"{vocab_path} has {len(vocabulary)} tokens but {config_path} says {field}={vocabulary_size} "
            "(the rows of the token embedding): use the vocab.txt that belongs to these weights."
        )
    return vocabulary


def build_and_load(backbone_kwargs, arrays, source, vocabulary, lowercase, ignored=(), with_heads=None):
    """Builds a BertBackbone (a BertPretrainer when `arrays` hold Google's `cls/` heads and
    `with_heads` is not False; with_heads=True demands them), attaches the vocabulary and loads
    `arrays` into it.

    Returns:
        (model, ImportReport)
    """
    from keras_bert_impl.models.bert_backbone import BertBackbone
    from keras_bert_impl.models.bert_pretrainer import BertPretrainer

    has_heads = any(name in arrays for name in HEAD_NAMES)
    if with_heads is True and not has_heads:
        raise ValueError(
            f"with_heads=True, but {source} has no MLM or NSP head (cls/predictions/*, "
            "cls/seq_relationship/*): pass with_heads=None to take the encoder alone."
        )
    backbone = BertBackbone(**backbone_kwargs)
    backbone.set_vocabulary(vocabulary, lowercase=lowercase)
    if with_heads is not False and has_heads:
        model = BertPretrainer(backbone)
        targets = pretrainer_variables(model)
    else:
        model = backbone
        targets = backbone_variables(backbone)
    return model, assign_weights(targets, arrays, source, ignored)
