"""Where a pipeline's per-key outputs wait until the whole run succeeded, and how each is written
once: every output file is named by its key and written atomically, so a bundle a runner retries
(a worker lost mid-bundle) replaces the same file with the same bytes instead of adding a second."""

import contextlib
import json
import os
import uuid


def staging_folder(output_dir, prefix):
    """The hidden folder beside the final outputs that a pipeline writes into."""
    return os.path.join(output_dir, f".beam-{prefix}")


@contextlib.contextmanager
def atomic_file(path):
    """Yields a temporary path beside `path`, unique per attempt, renamed onto `path` if the
    block succeeds (and removed if it fails): two attempts at one key never interleave."""
    temp = os.path.join(os.path.dirname(path), f".tmp-{uuid.uuid4().hex}-{os.path.basename(path)}")
    try:
        yield temp
        os.replace(temp, path)
    finally:
        with contextlib.suppress(OSError):
            os.remove(temp)


def write_sidecar(path, record):
    """`record` (a dict) as `path`.json, atomically: what a finished shard reports to the
    step that puts the shards in place."""
    with atomic_file(path + ".json") as temp:
        with open(temp, "w", encoding="utf-8") as f:
            json.dump(record, f, sort_keys=True)


def read_sidecar(path):
    with open(path + ".json", encoding="utf-8") as f:
        return json.load(f)
