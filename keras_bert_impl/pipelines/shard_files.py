"""Where a pipeline's per-key outputs wait until the whole run succeeded, and how each is written
once: every output file is named by its key and written atomically, so a bundle a runner retries
(a worker lost mid-bundle) replaces the same file with the same bytes instead of adding a second.
Paths may be local or remote (keras_bert_impl.file_paths)."""

import contextlib
import json
import uuid

from keras_bert_impl import file_paths


def staging_folder(output_dir, prefix):
    """The hidden folder beside the final outputs that a pipeline writes into."""
    return file_paths.join(output_dir, f".beam-{prefix}")


@contextlib.contextmanager
def atomic_file(path):
    """Yields a temporary path beside `path`, unique per attempt, renamed onto `path` if the
    block succeeds (and removed if it fails): two attempts at one key never interleave."""
    name = f".tmp-{uuid.uuid4().hex}-{file_paths.basename(path)}"
    temp = file_paths.join(file_paths.parent_of(path), name)
    try:
        yield temp
        file_paths.replace(temp, path)
    finally:
        with contextlib.suppress(OSError):
            if file_paths.exists(temp):
                file_paths.remove(temp)


def write_sidecar(path, record):
    """`record` (a dict) as `path`.json, atomically: what a finished shard reports to the
    step that puts the shards in place."""
    with atomic_file(path + ".json") as temp:
        file_paths.write_text(temp, json.dumps(record, sort_keys=True))


def read_sidecar(path):
    return json.loads(file_paths.read_text(path + ".json"))


def write_json(data, path, **dump_kwargs):
    """`data` as the JSON file `path`, atomically (a local one as every artifact of the library)."""
    if not file_paths.is_remote(path):
        from keras_bert_impl.atomic_write import write_json_atomically

        write_json_atomically(data, path, **dump_kwargs)
        return
    with atomic_file(path) as temp:
        file_paths.write_text(temp, json.dumps(data, **dump_kwargs) + "\n")
