"""A `kbert` child process that says which heavy modules it imported: the check behind every
command that runs without TensorFlow."""

HEAVY = ("tensorflow", "tensorflow_text", "keras", "tf_keras")


def kbert_child(command):
    """`python -c` code running `kbert COMMAND ARGS...` (ARGS: the child's argv) as the console
    script does (named kbert, which defers the model imports to cli.main); at exit it prints
    `heavy [...]`, the modules of HEAVY it imported, on a line of its own."""
    return (
        "import sys; sys.argv[0] = 'kbert'; from keras_bert_impl.cli import main; "
        f"status = main([{command!r}, *sys.argv[1:]]); "
        f"print('heavy', sorted(m for m in {HEAVY!r} if m in sys.modules), flush=True); sys.exit(status)"
    )
