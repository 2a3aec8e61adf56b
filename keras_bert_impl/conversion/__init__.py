"""Keras model -> .tflite (`tflite_converter`), and the input contract of every exported graph
(`input_contract`): the one conversion home that the export wing (tflite/, text-in and
MediaPipe files) and `--precision int8` share.

Nothing is imported here: `input_contract` is read by `kbert --help` (the format and
precision lists) without TensorFlow; `tflite_converter` needs TensorFlow."""
