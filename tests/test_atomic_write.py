import os
import stat

import pytest

from keras_bert_impl.atomic_write import (
    replace_folder,
    write_atomically,
    write_json_atomically,
    write_text_atomically,
)


def test_artifact_gets_the_mode_a_plain_open_would_give(tmp_path):
    old = os.umask(0o022)
    try:
        write_text_atomically("x", str(tmp_path / "a.txt"))
        with open(tmp_path / "b.txt", "w") as f:
            f.write("x")
    finally:
        os.umask(old)
    mode = stat.S_IMODE(os.stat(tmp_path / "a.txt").st_mode)
    assert mode == stat.S_IMODE(os.stat(tmp_path / "b.txt").st_mode) == 0o644


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "m.json"
    write_json_atomically({"v": 1}, str(path))

    def fail(tmp):
        with open(tmp, "w") as f:
            f.write("{torn")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        write_atomically(str(path), fail)
    assert path.read_text() == '{"v": 1}\n'
    assert sorted(os.listdir(tmp_path)) == ["m.json"]


def test_a_folder_replaces_the_old_one_which_a_crash_never_loses(tmp_path, monkeypatch):
    """kbert index used to remove the old index before renaming the new one in: a crash between
    the two left neither."""
    path, work = tmp_path / "index", tmp_path / "work"
    for folder, text in ((path, "old"), (work, "new")):
        folder.mkdir()
        (folder / "data.txt").write_text(text)
    real_rename, calls = os.rename, []

    def crash_on_the_second(source, destination):
        calls.append(source)
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed between the two renames
        real_rename(source, destination)

    monkeypatch.setattr(os, "rename", crash_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        replace_folder(str(work), str(path))
    (aside,) = [p for p in os.listdir(tmp_path) if p.startswith("index.old-")]
    assert (tmp_path / aside / "data.txt").read_text() == "old"  # still there, beside its place
    monkeypatch.setattr(os, "rename", real_rename)
    real_rename(tmp_path / aside, path)
    replace_folder(str(work), str(path))
    assert (path / "data.txt").read_text() == "new" and sorted(os.listdir(tmp_path)) == ["index"]
