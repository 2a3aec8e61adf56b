"""Which transformers class holds one of our models, its config.json and its tensors.

Shape legend: H hidden size, C classes.
"""

from typing import NamedTuple

import numpy as np

import keras_bert_impl as kb
from keras_bert_impl.checkpoints import HUGGINGFACE_HIDDEN_ACT, huggingface_tensors
from keras_bert_impl_export.huggingface.not_expressible_error import NotExpressibleError

# Our activation -> transformers' hidden_act: the first of the importer's names for it
# ("gelu_new" for the tanh GELU), so importing the export gives the same activation back.
_HIDDEN_ACT = {ours: theirs for theirs, ours in reversed(list(HUGGINGFACE_HIDDEN_ACT.items()))}


class TransformersModel(NamedTuple):
    architecture: str  # the transformers class, e.g. "BertForSequenceClassification"
    task: str  # what the model card calls the head
    config: dict  # config.json
    tensors: dict  # model.safetensors: {name: numpy array}
    label_names: list  # in id order ([] for heads without labels)
    notes: list  # how the transformers model is used differently (the model card lists them)


def _linear(dense):
    """A Keras Dense as a PyTorch Linear's (weight [out, in], bias [out])."""
    return np.ascontiguousarray(dense.kernel.numpy().T), dense.bias.numpy()


def _without_pooler(tensors, notes):
    """Token-level heads: transformers builds their BertModel without a pooler, so its weights
    would be unexpected keys; our head never reads it either."""
    notes.append(
        "The encoder's pooler is left out: this head does not use it, and transformers' class has none."
    )
    return {name: value for name, value in tensors.items() if not name.startswith("bert.pooler.")}


def _check_backbone(backbone):
    if backbone.position_embedding != "learned":
        raise NotExpressibleError(
            f"the backbone has position_embedding={backbone.position_embedding!r}; transformers' BERT has "
            "learned position embeddings only (position_embedding_type 'absolute'): export a model with "
            "learned positions."
        )
    if backbone.activation not in _HIDDEN_ACT:
        raise NotExpressibleError(
            f"the backbone's activation {backbone.activation!r} has no transformers hidden_act "
            f"(they have {sorted(_HIDDEN_ACT)}): export a model with one of those."
        )
    if backbone.vocabulary is None:
        raise NotExpressibleError(
            "the model carries no vocabulary, so no tokenizer can be written: use a model written by kbert "
            "convert, pretrain or finetune, or attach one with backbone.set_vocabulary('vocab.txt', "
            "lowercase=...) and save."
        )


def _check_float(model):
    kinds = sorted({str(v.dtype) for v in model.weights if not str(v.dtype).startswith("float32")})
    if kinds:
        raise NotExpressibleError(
            f"the model holds {', '.join(kinds)} weights (an int8-quantized or low-precision .keras); a "
            "transformers folder holds the float32 model: export the run's float model (model.keras of "
            "kbert finetune, before quantizing)."
        )


def _config(backbone, architecture):
    return {
        "architectures": [architecture],
        "model_type": "bert",
        "vocab_size": backbone.vocabulary_size,
        "hidden_size": backbone.hidden_dim,
        "num_hidden_layers": backbone.num_layers,
        "num_attention_heads": backbone.num_heads,
        "intermediate_size": backbone.intermediate_dim,
        "hidden_act": _HIDDEN_ACT[backbone.activation],
        "hidden_dropout_prob": backbone.dropout,
        "attention_probs_dropout_prob": backbone.dropout
        if backbone.attention_dropout is None
        else backbone.attention_dropout,
        "max_position_embeddings": backbone.max_sequence_length,
        "type_vocab_size": backbone.num_segments,
        "initializer_range": backbone.initializer_range,
        "layer_norm_eps": backbone.layer_norm_epsilon,
        "pad_token_id": list(backbone.vocabulary).index("[PAD]"),
        "position_embedding_type": "absolute",
        "dtype": "float32",
    }


def _labels(config, label_names, num_classes):
    names = list(label_names) if label_names else [f"LABEL_{i}" for i in range(num_classes)]
    config["id2label"] = {str(i): name for i, name in enumerate(names)}
    config["label2id"] = {name: i for i, name in enumerate(names)}
    return list(label_names or [])


def transformers_model(model):
    """The transformers class, config.json and tensors of `model`, or a NotExpressibleError.

    Args:
        model: a `BertBackbone` (-> BertModel), `BertPretrainer` (-> BertForPreTraining),
            `BertClassifier` with pooling "pooled" (-> BertForSequenceClassification),
            `BertTokenClassifier` (-> BertForTokenClassification) or `BertSpanLabeler`
            (-> BertForQuestionAnswering); a `QuantizationAwareClassifier` gives its float
            classifier's.
    Returns:
        TransformersModel.
    """
    notes, label_names = [], []
    if isinstance(model, kb.QuantizationAwareClassifier):
        # transformers has no fake quantization: the folder holds the float classifier it wraps, as
        # the other export files of a --qat run do.
        notes.append(
            "The model was trained quantization-aware (kbert finetune --qat): this folder holds the float "
            "classifier it wraps; the integer-only TFLite file of kbert export computes as it was trained."
        )
        model = model.classifier
    backbone = model if isinstance(model, kb.BertBackbone) else getattr(model, "backbone", None)
    if not isinstance(backbone, kb.BertBackbone):
        raise NotExpressibleError(f"a {type(model).__name__} is not a keras_bert_impl BERT model.")
    _check_backbone(backbone)
    _check_float(model)
    if isinstance(model, kb.BertBackbone):
        architecture, task = "BertModel", "feature extraction (the encoder, with its pooler)"
        config, tensors = _config(backbone, architecture), huggingface_tensors(model)
    elif isinstance(model, kb.BertPretrainer):
        if model.masked_lm_head.activation != backbone.activation:
            raise NotExpressibleError(
                f"the masked-LM transform uses {model.masked_lm_head.activation!r} and the encoder "
                f"{backbone.activation!r}; transformers' BertForPreTraining uses hidden_act for both."
            )
        architecture, task = (
            "BertForPreTraining",
            "pretraining (masked LM tied to the word embeddings, next sentence)",
        )
        config, tensors = _config(backbone, architecture), huggingface_tensors(model, prefix="bert.")
    elif isinstance(model, kb.BertClassifier):
        if model.pooling != "pooled":
            raise NotExpressibleError(
                f"the classifier pools with pooling={model.pooling!r}; transformers' "
                "BertForSequenceClassification classifies the pooler's [CLS] vector only: fine-tune with "
                "--pooling pooled to export it to transformers."
            )
        architecture = "BertForSequenceClassification"
        task = "multi-label classification" if model.multi_label else "sequence classification"
        config, tensors = _config(backbone, architecture), huggingface_tensors(backbone, prefix="bert.")
        label_names = _labels(config, model.label_names, model.num_classes)
        config["problem_type"] = (
            "multi_label_classification" if model.multi_label else "single_label_classification"
        )
        tensors["classifier.weight"], tensors["classifier.bias"] = _linear(model.output_dense)  # [C, H], [C]
        if model.activation is not None:
            notes.append(
                f"The Keras model outputs {model.activation} probabilities; transformers gives the logits "
                f"before them: apply {model.activation} to `logits`."
            )
    elif isinstance(model, kb.BertTokenClassifier):
        architecture, task = "BertForTokenClassification", "token classification (tagging)"
        config = _config(backbone, architecture)
        tensors = _without_pooler(huggingface_tensors(backbone, prefix="bert."), notes)
        label_names = _labels(config, model.label_names, model.num_classes)
        tensors["classifier.weight"], tensors["classifier.bias"] = _linear(model.output_dense)  # [C, H], [C]
    elif isinstance(model, kb.BertSpanLabeler):
        architecture, task = "BertForQuestionAnswering", "extractive question answering (spans)"
        config = _config(backbone, architecture)
        tensors = _without_pooler(huggingface_tensors(backbone, prefix="bert."), notes)
        tensors["qa_outputs.weight"], tensors["qa_outputs.bias"] = _linear(model.span_dense)  # [2, H], [2]
        notes.append(
            "The Keras model gives padded positions a start/end logit of -1e9; transformers leaves them "
            "as computed: mask them (attention_mask == 0) before taking the best span."
        )
    else:
        raise NotExpressibleError(
            f"a {type(model).__name__} has no transformers BERT class (a sentence embedder's pooling is not "
            "a transformers model): export it with --formats sentence_transformers "
            "(export_sentence_transformers), or its backbone (model.backbone.save('encoder.keras')) as a "
            "BertModel."
        )
    return TransformersModel(architecture, task, config, tensors, label_names, notes)
