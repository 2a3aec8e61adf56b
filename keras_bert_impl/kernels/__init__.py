"""Pallas kernels for BERT's elementwise chains on the JAX backend (opt-in: `fused_kernels=True`).

Nothing here is imported by `import keras_bert_impl` or on TensorFlow/PyTorch: the layers import
`fused_choice` inside their `call`, and the kernel modules only once it says the kernels run
(JAX on a GPU, or Pallas' interpret mode forced for the CPU tests).
"""
