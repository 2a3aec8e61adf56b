"""The serving wing: `kbert serve`'s local stand-in for TF Serving over SavedModels. It loads what
the export wing wrote (`ServableModel`: one SavedModel version, TF Serving's "servable"; LoRA
runs over one backbone, `lora_adapters`); the server itself, TensorFlow-free (batching concurrent
requests and TF Serving's REST bodies), is `keras_bert_lite.serve`. It reads exports from disk and
imports nothing of the exporting modules."""
