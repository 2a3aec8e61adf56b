"""The PyTorch + transformers reference. Runs in its own venv (.venv-torch): nothing here
imports keras_bert_impl or TensorFlow; a run prints its result as JSON on standard output
and the calling bench, in the project venv, writes the results file."""
