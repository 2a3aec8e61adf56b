import os
import stat

import pytest

from keras_bert_impl.atomic_write import write_atomically, write_json_atomically, write_text_atomically

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
