"""Apache Beam pipelines of the data-heavy commands (docs/beam.md): the keyed pretraining
examples, batch prediction and embedding. Beam is imported only when a pipeline runs, so the
rest of the library and `kbert --help` never pay for it."""

from keras_bert_impl.pipelines.pipeline_options import LOCAL_RUNNER, RUNNER_NAMES, pipeline_options
from keras_bert_impl.pipelines.pretraining_pipeline import PretrainingPipeline
from keras_bert_impl.pipelines.inference_pipeline import InferencePipeline, read_manifest
from keras_bert_impl.pipelines.text_shard import TextShard, text_shards

__all__ = [
    "LOCAL_RUNNER",
    "RUNNER_NAMES",
    "InferencePipeline",
    "PretrainingPipeline",
    "TextShard",
    "pipeline_options",
    "read_manifest",
    "text_shards",
]
