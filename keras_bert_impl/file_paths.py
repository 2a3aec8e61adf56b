"""Paths that are local or on any filesystem Apache Beam has registered (gs://, s3://,
azfs://, hdfs://...): one set of calls for globs, reads, writes and renames, so the commands
that run on Beam take a cloud path wherever they take a local one.

A local path keeps the behaviour of os, glob and open exactly (a literal name with glob
characters, permissions, folders); a path with a scheme goes through Beam's `FileSystems`,
imported only then, so the one-process commands never load Beam. Object stores have no
folders: a remote "folder" is the prefix its objects share, created by writing into it.
"""

import glob
import hashlib
import os
import re
import shutil
import tempfile

_SCHEME = re.compile(r"^[a-zA-Z][-a-zA-Z0-9+.]*://")
_GLOB = ("*", "?", "[")


def is_remote(path):
    """Whether `path` names a file of a Beam filesystem (it starts with `scheme://`)."""
    return bool(_SCHEME.match(os.fspath(path)))


def _file_systems():
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def join(folder, *names):
    if is_remote(folder):
        return "/".join([folder.rstrip("/"), *names])
    return os.path.join(folder, *names)


def absolute(path):
    return path if is_remote(path) else os.path.abspath(path)


def basename(path):
    return path.rstrip("/").rsplit("/", 1)[-1] if is_remote(path) else os.path.basename(path)


def expand(pattern):
    """The files `pattern` names, sorted: itself where it exists (a literal name may hold glob
    characters: "&" or "[" in a corpus name), else its glob's matches (none: [])."""
    if not is_remote(pattern):
        return [pattern] if os.path.exists(pattern) else sorted(glob.glob(pattern))
    if not any(c in pattern for c in _GLOB) or exists(pattern):
        return [pattern] if exists(pattern) else []
    (result,) = _file_systems().match([pattern])
    return sorted(m.path for m in result.metadata_list)


def exists(path):
    """Whether `path` is a file (local: a file or a folder)."""
    if not is_remote(path):
        return os.path.exists(path)
    return _file_systems().exists(path)


def is_folder(path):
    """Whether `path` is a folder (remote: whether any object lies under `path/`)."""
    if not is_remote(path):
        return os.path.isdir(path)
    (result,) = _file_systems().match([join(path, "**")], limits=[1])
    return bool(result.metadata_list)


def size(path):
    if not is_remote(path):
        return os.path.getsize(path)
    (result,) = _file_systems().match([path])
    return result.metadata_list[0].size_in_bytes


def stamp(path):
    """(size, modification time) of the file `path`, or None where no file is: what tells a
    file replaced since from the same file."""
    if not is_remote(path):
        if not os.path.isfile(path):
            return None
        stat = os.stat(path)
        return stat.st_size, stat.st_mtime_ns
    (result,) = _file_systems().match([path])
    files = [m for m in result.metadata_list if m.path == path]
    return (files[0].size_in_bytes, files[0].last_updated_in_seconds) if files else None


def sha256(path):
    """The hex sha256 of the local file `path`'s bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def open_read(path):
    """`path` open for reading bytes (seekable), never decompressed by its extension."""
    if not is_remote(path):
        return open(path, "rb")
    from apache_beam.io.filesystem import CompressionTypes

    return _file_systems().open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def open_write(path):
    """`path` open for writing bytes (a remote file appears when it is closed)."""
    if not is_remote(path):
        return open(path, "wb")
    from apache_beam.io.filesystem import CompressionTypes

    return _file_systems().create(path, compression_type=CompressionTypes.UNCOMPRESSED)


def read_bytes(path):
    with open_read(path) as f:
        return f.read()


def read_text(path):
    return read_bytes(path).decode("utf-8")


def is_file(path):
    """Whether `path` is a file (local: not a folder)."""
    return exists(path) if is_remote(path) else os.path.isfile(path)


def write_text(path, text):
    with open_write(path) as f:
        f.write(text.encode("utf-8"))


def upload(local_path, path):
    """Copies the local file `local_path` to `path` (a local path: moves it)."""
    if not is_remote(path):
        os.replace(local_path, path)
        return
    with open(local_path, "rb") as source, open_write(path) as target:
        shutil.copyfileobj(source, target, 1 << 20)


def replace(source, target):
    """Renames `source` onto `target`, replacing it (remote: a copy over it, then the source
    deleted: a reader sees the old or the new file, and a retried rename writes the same bytes)."""
    if not is_remote(target):
        os.replace(source, target)
        return
    _file_systems().rename([source], [target])


def remove(path):
    if not is_remote(path):
        os.remove(path)
        return
    _file_systems().delete([path])


def remove_tree(folder):
    """Deletes `folder` and all under it; nothing there is not an error."""
    if not is_remote(folder):
        shutil.rmtree(folder, ignore_errors=True)
        return
    (result,) = _file_systems().match([join(folder, "**")])
    paths = [m.path for m in result.metadata_list]
    if paths:
        _file_systems().delete(paths)


def makedirs(folder):
    """Creates a local folder (and its parents); a remote one needs nothing."""
    if not is_remote(folder):
        os.makedirs(folder, exist_ok=True)


def listdir(folder):
    """The names of the files directly in `folder` (local: folders too)."""
    if not is_remote(folder):
        return os.listdir(folder) if os.path.isdir(folder) else []
    (result,) = _file_systems().match([join(folder, "*")])
    prefix = folder.rstrip("/") + "/"
    return sorted(m.path[len(prefix) :] for m in result.metadata_list if "/" not in m.path[len(prefix) :])


def local_copy(path):
    """A local path holding what `path` names: `path` itself if local, else a copy in this
    machine's temporary folder (made once per path; a worker that finds it reuses it). A folder
    (a run or checkpoint folder) is copied with the files directly in it, not its subfolders; a
    file with the .json files beside it (a run's task.json). Returns the local path of the file
    or folder, or `path` unchanged when nothing is there (the caller's own check then names it)."""
    if not is_remote(path):
        return path
    path = path.rstrip("/")
    key = hashlib.sha256(path.encode("utf-8")).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), "kbert-remote", key)
    if exists(path):  # a file: it and the .json files beside it
        source = parent_of(path)
        names = [basename(path), *(n for n in listdir(source) if n.endswith(".json"))]
        local = os.path.join(folder, basename(path))
    elif is_folder(path):
        source, names = path, listdir(path)
        folder = local = os.path.join(folder, basename(path))
    else:
        return path
    os.makedirs(folder, exist_ok=True)
    for name in dict.fromkeys(names):
        _download(join(source, name), os.path.join(folder, name))
    return local


def with_local_model(args):
    """A copy of the argparse namespace `args` whose --model is local (`local_copy`): Keras loads
    local files, so a model in a bucket is copied to the machine that loads it."""
    import argparse

    return argparse.Namespace(**dict(vars(args), model=local_copy(args.model)))


def parent_of(path):
    return path.rstrip("/").rsplit("/", 1)[0] if is_remote(path) else os.path.dirname(path)


def _download(path, local):
    """Copies remote `path` to `local` unless a copy of its size is there; written under a temporary
    name and renamed, so two processes copying the same file never read it half written."""
    if os.path.isfile(local) and os.path.getsize(local) == size(path):
        return
    fd, temp = tempfile.mkstemp(dir=os.path.dirname(local), prefix=".part-")
    try:
        with os.fdopen(fd, "wb") as target, open_read(path) as source:
            shutil.copyfileobj(source, target, 1 << 20)
        os.replace(temp, local)
    finally:
        if os.path.exists(temp):
            os.remove(temp)
