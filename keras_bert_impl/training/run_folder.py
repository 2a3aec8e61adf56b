"""A training run's output folder: what made it, and the rules that keep a user's work.

Plain Python (no TensorFlow): the checks run before any model is loaded.
"""

import datetime
import hashlib
import json
import os
import shutil
import sys
import zipfile

from keras_bert_impl.atomic_write import write_json_atomically
from keras_bert_impl.damaged_file_error import ZIP_DAMAGE, damaged_archive

RECORD = "run.json"
# What a training command writes into its folder; --overwrite removes these and nothing else.
RUN_ENTRIES = (
    "model.keras",
    "best.keras",
    "best.keras.json",
    "metrics.json",
    "task.json",
    "logs",
    "backup",
    "split",
    "records",
    RECORD,
)
_HASH_SKIPS = ("backup", "logs")  # a run folder given as an input: its model files, not its training state


class RunFolderError(ValueError):
    """A run folder this run must not touch, or whose record cannot be read; the message
    names the folder and the fix (`kbert` prints it in one line, exit status 2)."""


def file_digest(path):
    """sha256 of a file, or of a folder's files (relative names and contents, in name order;
    a run folder's backup/ and logs/ left out). A .keras file hashes its entries' names and
    contents, without the save time (the zip's dates, metadata.json)."""
    digest = hashlib.sha256()
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not (root == path and d in _HASH_SKIPS))
            for name in sorted(files):
                full = os.path.join(root, name)
                digest.update(os.path.relpath(full, path).encode("utf-8") + b"\0")
                _update(digest, full)
    else:
        _update(digest, path)
    return digest.hexdigest()


def _update(digest, path):
    if path.endswith(".keras") and zipfile.is_zipfile(path):
        # A .keras file is a zip with the time it was saved (in metadata.json and the entries'
        # dates): the same model saved again (kbert convert re-run) must hash the same.
        try:
            with zipfile.ZipFile(path) as archive:
                for name in sorted(n for n in archive.namelist() if n != "metadata.json"):
                    digest.update(name.encode("utf-8") + b"\0")
                    with archive.open(name) as f:
                        for block in iter(lambda: f.read(1 << 20), b""):
                            digest.update(block)
        except ZIP_DAMAGE as e:
            # Reading every entry checks its CRC-32: the first reader of a damaged input says so.
            raise damaged_archive(path, e) from None
        return
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)


def _input_record(value):
    """{"path", "sha256"} of an input file or folder, or of a list of them (one digest over
    theirs, in order); None when one does not exist (the command's own check says so)."""
    paths = value if isinstance(value, list) else [value]
    if not all(os.path.exists(p) for p in paths):
        return None
    if not isinstance(value, list):
        return {"path": os.path.abspath(value), "sha256": file_digest(value)}
    digest = hashlib.sha256("\n".join(file_digest(p) for p in paths).encode("ascii")).hexdigest()
    return {"path": [os.path.abspath(p) for p in paths], "sha256": digest}


def _flag(key):
    return "--" + key.replace("_", "-")


class RunFolder:
    """The rules of a training run's output folder (`--output` of the training commands).

    The folder records what made it in `run.json`: the command, every setting, and the
    sha256 of every input file. Running a command into it:
    - a new or empty folder: a new run;
    - the same command, settings and inputs, unfinished: resume (the backup holds the state);
    - the same, finished: nothing is changed, and the command says where the results are;
    - anything else (other settings, an edited input, another command, files of a run made
      before run.json existed): refused with what differs, unless `overwrite`, which removes
      the previous run's files (`RUN_ENTRIES`) and starts afresh;
    - a folder holding files a run does not write, or a regular file: always refused.

    Args:
        path: the output folder.
        command: what trains in it, e.g. "finetune" (a folder made by another is refused).
        settings: dict of JSON values: what the run computes with; compared on every rerun.
        inputs: dict of input name -> file or folder path (or a list of them, or None):
            hashed, so an edited input is refused however it is named.
        overwrite: bool. Replace a run of other settings or inputs instead of refusing it.
        keep_backup: bool. Keep `backup/` (the full training state) after the run finishes.

    Example:
    >>> folder = RunFolder("run", "train", settings={"learning_rate": 0.001})
    >>> folder.check()
    'new'
    >>> RunFolder("run", "train", settings={"learning_rate": 0.01}).check()  # nothing written yet: a new run
    'new'
    """

    def __init__(self, path, command, settings, inputs=None, overwrite=False, keep_backup=False):
        self.path = os.fspath(path)
        self.command = command
        self.overwrite = bool(overwrite)
        self.keep_backup = bool(keep_backup)
        records = {k: _input_record(v) for k, v in sorted((inputs or {}).items()) if v is not None}
        self.inputs = {k: v for k, v in records.items() if v is not None}
        self.settings = dict(sorted(settings.items()))
        self.state = None

    @property
    def record_path(self):
        return os.path.join(self.path, RECORD)

    def check(self):
        """Reads the folder without writing: "new", "resume" or "finished"; raises RunFolderError
        for a folder this run must not touch."""
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise RunFolderError(
                f"--output {self.path} is a file, not a folder: give the path of a new folder."
            )
        entries = (
            sorted(e for e in os.listdir(self.path) if not e.startswith(".tmp-"))
            if os.path.isdir(self.path)
            else []
        )
        foreign = [e for e in entries if e not in RUN_ENTRIES]
        if foreign:
            raise RunFolderError(
                f"--output {self.path} holds files a kbert run does not write ({', '.join(foreign[:5])}"
                f"{', ...' if len(foreign) > 5 else ''}): give a new or empty folder "
                "(kbert never deletes them, --overwrite included)."
            )
        if not entries:
            self.state = "new"
            return self.state
        record = self._record()
        differences = self._differences(record)
        if differences:
            if self.overwrite:
                self.state = "new"
                return self.state
            raise RunFolderError(
                f"--output {self.path} holds a run made by {'; '.join(differences)}. Run the same command as "
                "before to resume it, give a new --output, or add --overwrite to replace that run."
            )
        self.state = "finished" if record.get("state") == "finished" else "resume"
        missing = [
            name
            for name in ("model.keras", "metrics.json")
            if not os.path.isfile(os.path.join(self.path, name))
        ]
        if self.state == "finished" and missing:
            # Reported as finished, the run would point at files that are gone (its backup went
            # when it finished, so nothing is left to resume from either).
            if self.overwrite:
                self.state = "new"
                return self.state
            raise RunFolderError(
                f"--output {self.path} holds a finished run whose {' and '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} gone: add --overwrite to train it again, "
                "or give a new --output."
            )
        return self.state

    def _record(self):
        try:
            with open(self.record_path, encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise RunFolderError(
                f"--output {self.path}: its {RECORD} cannot be read ({e}): "
                "add --overwrite to replace the run, or give a new --output."
            ) from None

    def _differences(self, record):
        if record is None:
            return ["a kbert version that kept no run.json (or it was deleted)"]
        if record.get("command") != self.command:
            return [f"kbert {record.get('command')}, not kbert {self.command}"]
        differences = []
        then_settings = record.get("settings", {})
        for key in sorted(set(then_settings) | set(self.settings)):
            then, now = then_settings.get(key), self.settings.get(key)
            if then != now:
                differences.append(f"{_flag(key)} {then} then, {now} now")
        then_inputs = record.get("inputs", {})
        for key in sorted(set(then_inputs) | set(self.inputs)):
            then, now = then_inputs.get(key), self.inputs.get(key)
            if then is None or now is None:
                differences.append(
                    f"{_flag(key)} {(then or now)['path']} "
                    f"{'given now only' if then is None else 'given then only'}"
                )
            elif then["sha256"] != now["sha256"]:
                differences.append(
                    f"{_flag(key)} {now['path']} changed since "
                    f"(sha256 {then['sha256'][:12]} then, {now['sha256'][:12]} now)"
                )
        return differences

    def start(self, write=True):
        """Before training: a new run clears a replaced run's files and records itself."""
        if self.state is None:
            raise RuntimeError("RunFolder.check() must run before start().")
        if self.state != "new" or not write:
            return
        if os.path.isdir(self.path):
            for entry in os.listdir(self.path):
                if entry in RUN_ENTRIES:
                    full = os.path.join(self.path, entry)
                    shutil.rmtree(full) if os.path.isdir(full) else os.remove(full)
        self._write("running")

    @staticmethod
    def best_file(best_epoch, last_epoch):
        """Where the best epoch's model is once the run finishes: model.keras when the best
        epoch is the last (best.keras would be a second copy of the same weights)."""
        if best_epoch is None:
            return None
        return "model.keras" if best_epoch == last_epoch else "best.keras"

    def finish(self, best_file, write=True):
        """After a successful run (model and metrics written): removes best.keras when the
        final model is the best, and the backup unless --keep-backup; records the run finished."""
        self.state = "finished"
        if not write:
            return
        if best_file == "model.keras":
            for name in ("best.keras", "best.keras.json"):
                if os.path.exists(os.path.join(self.path, name)):
                    os.remove(os.path.join(self.path, name))
        if not self.keep_backup:
            shutil.rmtree(os.path.join(self.path, "backup"), ignore_errors=True)
        self._write("finished")

    def report_finished(self, prefix):
        print(
            f"{prefix}: {self.path} already holds this finished run (the same settings and inputs); "
            f"nothing was changed. Results: {os.path.join(self.path, 'metrics.json')}, "
            f"model: {os.path.join(self.path, 'model.keras')}.",
            file=sys.stderr,
        )

    def _write(self, state):
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        record = self._record() if state == "finished" and os.path.exists(self.record_path) else {}
        record.update(
            {"command": self.command, "settings": self.settings, "inputs": self.inputs, "state": state}
        )
        record.setdefault("started", now)
        if state == "finished":
            record["finished"] = now
        write_json_atomically(record, self.record_path, indent=2, sort_keys=True)
