"""The converter's and the interpreter's own log lines, held back unless something fails.

TFLite's converter writes from C++ straight to the process' file descriptors, past Python's
`sys.stderr` and past TF_CPP_MIN_LOG_LEVEL: absl's "W0000 ... Ignored output_format", MLIR's
pass notes, the quantizer's "fully_quantize: 0, inference_type: 6, ..." line, and, through
Python's warnings, the calibration's `tf.lite.Interpreter` deprecation notice; LiteRT's
interpreter says "Created TensorFlow Lite XNNPACK delegate for CPU" on its first run. None of
it is for the user of `kbert export` or `--precision int8` when the conversion works, and all
of it is the evidence when it does not.
"""

import contextlib
import os
import sys
import tempfile

# The descriptors held: the converter writes its notes to both.
_HELD_DESCRIPTORS = (1, 2)


@contextlib.contextmanager
def native_output_held():
    """Sends file descriptors 1 and 2 (C++'s stdout and stderr, and Python's) into a
    temporary file for the duration of the block; if the block raises, writes what was held
    to stderr before the exception goes on, else drops it."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = {fd: os.dup(fd) for fd in _HELD_DESCRIPTORS}
    with tempfile.TemporaryFile(mode="w+b") as held:
        for fd in _HELD_DESCRIPTORS:
            os.dup2(held.fileno(), fd)
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            if failed:
                held.seek(0)
                sys.stderr.write(held.read().decode("utf-8", "replace"))
                sys.stderr.flush()
