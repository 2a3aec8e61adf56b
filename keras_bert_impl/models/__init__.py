from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.models.bert_embedder import BertEmbedder
from keras_bert_impl.models.bert_pretrainer import BertPretrainer
from keras_bert_impl.models.bert_span_labeler import BertSpanLabeler
from keras_bert_impl.models.bert_task import BertTask
from keras_bert_impl.models.bert_token_classifier import BertTokenClassifier
from keras_bert_impl.distillation_defaults import DISTILLATION_DEFAULTS, DistillationDefaults
from keras_bert_impl.models.distillation import (
    AttentionTerm,
    DistillationArgumentError,
    DistillationLoss,
    DistillationTerm,
    Distiller,
    EmbeddingTerm,
    HiddenStatesTerm,
    LogitsTerm,
    backbone_from_layers,
    distillation_teacher,
    distillation_terms,
    embeddings_from_teacher,
    student_backbone,
    student_model,
)
from keras_bert_impl.models.global_batch_loss import GlobalBatchLoss
from keras_bert_impl.models.masked_lm_accuracy import MaskedLMAccuracy
from keras_bert_impl.models.lora import DEFAULT_LORA_TARGETS, LORA_TARGET_NAMES, merge_lora
from keras_bert_impl.models.lora_adapter_bank import LoraAdapterBank
from keras_bert_impl.models.masked_sparse_crossentropy import MaskedSparseCrossentropy
from keras_bert_impl.models.presets import BERT_PRESETS
from keras_bert_impl.models.quantization_aware_classifier import QuantizationAwareClassifier
from keras_bert_impl.models.task_heads import best_monitor, build_head
