from keras_bert_impl.layers.activation_ranges import ActivationRanges
from keras_bert_impl.layers.bert_embeddings import BertEmbeddings
from keras_bert_impl.layers.bert_pooler import BertPooler
from keras_bert_impl.layers.feed_forward import FeedForward
from keras_bert_impl.layers.masked_lm_head import MaskedLMHead
from keras_bert_impl.layers.multi_head_attention import MultiHeadAttention
from keras_bert_impl.layers.next_sentence_head import NextSentenceHead
from keras_bert_impl.layers.transformer_encoder import TransformerEncoder

__all__ = [
    "ActivationRanges",
    "BertEmbeddings",
    "BertPooler",
    "FeedForward",
    "MaskedLMHead",
    "MultiHeadAttention",
    "NextSentenceHead",
    "TransformerEncoder",
]
