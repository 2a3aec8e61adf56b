"""A text model that kills its worker process in the middle of its first batch (once per marker
file), for the kill-a-worker test: Beam must rerun the lost bundle, and the output must hold
each line exactly once."""

import os


class KillOnce:
    """Wraps a model loader: the first `infer` call anywhere (the marker file is absent) creates
    the marker and ends the process with os._exit, as a killed or crashed worker would."""

    def __init__(self, marker, load):
        self.marker = marker
        self.model = load()

    def infer(self, texts):
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return self.model.infer(texts)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os._exit(17)


class LengthModel:
    """A stand-in model (no TensorFlow): a text's row is its length and its text."""

    def infer(self, texts):
        return [{"text": text, "length": len(text)} for text in texts]
