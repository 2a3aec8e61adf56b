"""Training: a run described by a `TrainingSpec` and trained by `run_training` (`TrainingRun` in a
`RunFolder`; `distillation_spec` fills one for a distillation), optimizer and schedule,
distribution strategies, resumable fit."""

from keras_bert_impl.training.all_replica_loss_scale_optimizer import AllReplicaLossScaleOptimizer
from keras_bert_impl.training.backup_and_restore import BackupAndRestore, BackupError
from keras_bert_impl.training.best_model_checkpoint import BestModelCheckpoint, inference_copy
from keras_bert_impl.training.distillation_spec import distillation_spec
from keras_bert_impl.training.divergence_guard import DivergenceGuard
from keras_bert_impl.training.epoch_timer import EpochTimer
from keras_bert_impl.training.fit_resumable import fit_resumable
from keras_bert_impl.training.global_clip_adamw import GlobalClipAdamW
from keras_bert_impl.training.optimizer import create_optimizer
from keras_bert_impl.training.strategy import create_strategy
from keras_bert_impl.training.warmup_polynomial_decay import WarmupPolynomialDecay
from keras_bert_impl.training.run_folder import RunFolder, RunFolderError
from keras_bert_impl.training.training_result import TrainingResult
from keras_bert_impl.training.training_data import TrainingData
from keras_bert_impl.training.training_run import TrainingRun, run_training, save_model
from keras_bert_impl.training.training_spec import TrainingSpec
