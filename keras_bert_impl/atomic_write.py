"""Artifacts are written beside their destination and renamed into place."""

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading


def write_atomically(path, write, suffix="", hold_interrupts=False):
    """Runs `write(tmp_path)` on a new temporary file in `path`'s folder, then renames
    it onto `path`, so a crash at any point leaves the old file or the new one, never a
    torn one. The temporary file (named `.tmp-*`) is removed when `write` fails.

    Args:
        path: the destination.
        write: callable taking the temporary path and writing the whole artifact there.
        suffix: ending of the temporary name (Keras insists on ".keras").
        hold_interrupts: bool. Hold Ctrl-C and SIGTERM until `write` returns, then raise them
            (the temporary file is removed), for writers that swallow a KeyboardInterrupt
            raised inside them: Keras' .keras writer finished its file under a SIGTERM and
            `kbert convert` exited 0. Not for a `write` that computes what it writes.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=suffix)
    os.close(fd)
    try:
        with interrupts_deferred() if hold_interrupts else contextlib.nullcontext():
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


@contextlib.contextmanager
def interrupts_deferred():
    """Holds a Ctrl-C (SIGINT), and a SIGTERM that `kbert` turns into one, back until the block
    ends, then hands the first to the handler that was in place (Python's raises KeyboardInterrupt).

    A KeyboardInterrupt inside np.savez's zip writer comes out as zipfile's ValueError ("Can't
    close the ZIP file while there is an open writing handle"), which the commands do not read
    as an interrupt (a traceback and exit 1, seen in a fresh-clone run), and Keras' .keras writer
    swallows it (the file finished, exit 0); deferred, the write ends whole and the interrupt lands
    after it. A SIGTERM whose action is not a Python
    handler is left alone. Signal handlers belong to the main thread: elsewhere the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = {}
    for number in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(number)
        if number == signal.SIGINT or callable(handler):
            previous[number] = signal.signal(number, lambda number, frame: received.append(number))
    # None: a handler not set from Python, which signal.signal cannot put back; the default stands in.
    previous = {
        number: signal.SIG_DFL if handler is None else handler for number, handler in previous.items()
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if not received or previous[received[0]] == signal.SIG_IGN:
        return
    handler = previous[received[0]]
    if callable(handler):
        handler(received[0], None)
    else:
        signal.raise_signal(received[0])  # SIG_DFL: its own action
