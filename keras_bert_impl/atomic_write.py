"""Artifacts are written beside their destination and renamed into place."""

import json
import os
import shutil
import tempfile


def write_atomically(path, write, suffix=""):
    """Runs `write(tmp_path)` on a new temporary file in `path`'s folder, then renames
    it onto `path`, so a crash at any point leaves the old file or the new one, never a
    torn one. The temporary file (named `.tmp-*`) is removed when `write` fails.

    Args:
        path: the destination.
        write: callable taking the temporary path and writing the whole artifact there.
        suffix: ending of the temporary name (Keras insists on ".keras").
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=suffix)
    os.close(fd)
    try:
        write(tmp)
        # mkstemp creates the file private (0600); an artifact gets the mode open() would give
        # it under the umask, so a server running as another user can read the model.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def replace_folder(work, path):
    """Renames the finished folder `work` onto `path`. An old `path` is renamed aside first and
    removed last, so a crash leaves the old folder (at `path`, or beside it as `path.old-PID`) or
    the new one, never neither."""
    path = os.path.abspath(path)
    old = None
    if os.path.exists(path):
        old = f"{path}.old-{os.getpid()}"
        os.rename(path, old)
    os.rename(work, path)
    if old and os.path.isdir(old):
        shutil.rmtree(old, ignore_errors=True)
    elif old:
        os.remove(old)


def _umask():
    mask = os.umask(0)  # the only way to read it is to set it
    os.umask(mask)
    return mask


def write_text_atomically(text, path):
    """`text` as UTF-8 with "\n" line ends (on every platform), written atomically."""
    def write(tmp):
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)

    write_atomically(path, write, suffix=".txt")


def write_json_atomically(data, path, **dump_kwargs):
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, **dump_kwargs)
            f.write("\n")

    write_atomically(path, write, suffix=".json")
