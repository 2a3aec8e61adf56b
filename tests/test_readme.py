"""The README's Python snippet (the ```python block under "## Use it from Python") runs as written.

The block is read from README.md on every run, so the test follows edits to it. It runs in a
temporary folder whose data/ holds links to the repository's data/ entries plus
data/demo/minilm.keras: the real all-MiniLM-L6-v2 converted as `make demo` converts it.
"""

import os
import re

import numpy as np

from keras_bert_impl.checkpoints import convert_checkpoint
from tests.conftest import REPO

SECTION = "## Use it from Python"


def readme_snippet():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert SECTION in readme, f"README.md has no {SECTION!r} section"
    section = re.split(r"^## ", readme.split(SECTION, 1)[1], flags=re.MULTILINE)[0]
    match = re.search(r"^```python\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    assert match, f"README.md's {SECTION!r} section has no ```python block"
    return match.group(1)


def test_readme_python_snippet_runs(data_dir, tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "demo").mkdir(parents=True)
    for name in os.listdir(data_dir):
        if name != "demo":
            (data / name).symlink_to(os.path.join(data_dir, name))
    backbone, _ = convert_checkpoint(os.path.join(data_dir, "minilm"), "huggingface")
    backbone.save(data / "demo" / "minilm.keras")
    monkeypatch.chdir(tmp_path)

    namespace = {"__name__": "readme"}
    exec(compile(readme_snippet(), "README.md", "exec"), namespace)

    assert "embeddings" in namespace, "the README snippet no longer defines `embeddings`: update this test"
    embeddings = namespace["embeddings"]
    assert embeddings.shape == (2, 384)  # two sentences, MiniLM's hidden size
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)
