"""One error for a model file that exists but whose bytes are not whole, and the checks that
raise it: a `.keras` archive (a zip), a SavedModel folder, a `.tflite` flatbuffer.

Plain Python (zipfile, no TensorFlow), so the run folder's input hashing, the command layer's
loaders and the export wing's servables share one message. It is an OSError, like an unreadable
file, so the `kbert` command layer answers it in one line with exit status 2 as it does every
other failure of a user's input.
"""

import os
import zipfile
import zlib

# What zipfile raises on a damaged archive: a bad CRC or header (BadZipFile), an entry whose
# deflate stream is cut or zeroed (zlib.error), an entry that ends early (EOFError).
ZIP_DAMAGE = (zipfile.BadZipFile, zlib.error, EOFError)


class DamagedFileError(OSError):
    """A model file that is damaged: one line naming the file, what is wrong and what to do.

    Args:
        path: str. The damaged file (inside a run or export folder: the file itself).
        problem: str. What is wrong with it, after "is", e.g. "damaged: a .keras archive whose entry
            model.weights.h5 fails its CRC-32 check".
        remedy: str. What to do; default: re-create it.
        flag: str or None. The flag that named it (e.g. "--init"), to say which input it is.

    Example:
    >>> str(DamagedFileError("/runs/a/model.keras", "damaged: truncated", flag="--model")).split(":")[0]
    '--model /runs/a/model.keras is damaged'
    """

    def __init__(self, path, problem, remedy=None, flag=None):
        self.path = path
        self.problem = problem
        remedy = remedy or "Re-create it (kbert convert, finetune, distill or export), or copy it again."
        named = f"{flag} {path}" if flag else str(path)
        super().__init__(f"{named} is {problem}. {remedy}")

    def __str__(self):
        return self.args[0]


def check_keras_archive(path, flag=None):
    """Raises DamagedFileError unless `path` is a whole zip archive (every entry's CRC-32 read
    and checked: a .keras file is a zip, and Keras' own errors on a damaged one name neither the
    file nor the fault). Reads the file once: ~0.3 s for the 91 MB MiniLM."""
    if not zipfile.is_zipfile(path):
        raise DamagedFileError(
            path,
            "not a .keras model (a .keras file is a zip archive: this one is truncated or another format)",
            flag=flag,
        )
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except ZIP_DAMAGE as e:
        raise damaged_archive(path, e, flag=flag) from None
    if bad is not None:
        raise DamagedFileError(
            path, f"damaged: a .keras archive whose entry {bad} fails its CRC-32 check", flag=flag
        )


def damaged_archive(path, error, flag=None):
    """The DamagedFileError for a .keras archive that zipfile could not read with `error` (one
    of ZIP_DAMAGE)."""
    return DamagedFileError(
        path, f"damaged: a .keras archive that cannot be read ({type(error).__name__}: {error})", flag=flag
    )


def damaged_export_file(path, error, flag=None):
    """The DamagedFileError for an export file (a SavedModel folder or a .tflite) that TensorFlow
    or LiteRT refused to load with `error`: the file it names, its first line."""
    first = " ".join(str(error).split())[:300] or type(error).__name__
    kind = (
        "damaged: a SavedModel that cannot be loaded"
        if os.path.isdir(path)
        else "damaged: a model file that cannot be loaded"
    )
    return DamagedFileError(
        path,
        f"{kind} ({type(error).__name__}: {first})",
        remedy="Export it again (kbert export), or copy the export folder again.",
        flag=flag,
    )
