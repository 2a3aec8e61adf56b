"""Training utilities: optimizer and schedule, distribution strategies."""

from keras_bert_impl.training.optimizer import create_optimizer
from keras_bert_impl.training.strategy import create_strategy
from keras_bert_impl.training.warmup_polynomial_decay import WarmupPolynomialDecay
