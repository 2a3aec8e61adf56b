"""The README's Python snippet (the ```python block under "## Use it from Python") runs as written;
the README stays short and every relative link of README.md and docs/*.md resolves.

The block is read from README.md on every run, so the test follows edits to it. It runs in a
temporary folder whose data/ holds links to the repository's data/ entries plus
data/demo/minilm.keras: the real all-MiniLM-L6-v2 converted as `make demo` converts it.
"""

import os
import re

import numpy as np
import pytest

from keras_bert_impl.checkpoints import convert_checkpoint
from tests.conftest import REPO

SECTION = "## Use it from Python"


def python_block(page, section_title):
    """The first ```python block of the `section_title` section of `page` (relative to REPO)."""
    with open(os.path.join(REPO, page), encoding="utf-8") as f:
        text = f.read()
    assert section_title in text, f"{page} has no {section_title!r} section"
    section = re.split(r"^## ", text.split(section_title, 1)[1], flags=re.MULTILINE)[0]
    match = re.search(r"^```python\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    assert match, f"{page}'s {section_title!r} section has no ```python block"
    return match.group(1)


def readme_snippet():
    return python_block("README.md", SECTION)


@pytest.mark.slow  # about 20 s or more: fine-tunes MiniLM as the README's Python example does
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


@pytest.mark.slow  # about 20 s or more: five heads each traced and trained one step
def test_python_api_training_snippet_runs(data_dir, tmp_path, monkeypatch):
    """docs/python_api.md's block of the labels each head's `fit` takes runs as written (bert_tiny,
    two sentences: each head trains one step)."""
    (tmp_path / "data").symlink_to(data_dir, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "python_api"}
    snippet = python_block("docs/python_api.md", "## Training each head: the labels `fit` takes")
    exec(compile(snippet, "docs/python_api.md", "exec"), namespace)
    assert namespace["embeddings"].shape == (2, 128)  # bert_tiny's hidden size


# The front page stays a front page (issue 29): the topics live in docs/.
README_MAX_LINES = 200


def test_readme_is_short():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, over {README_MAX_LINES}: move the detail to a page under docs/"
    )


def _markdown_files():
    docs = os.path.join(REPO, "docs")
    return ["README.md"] + sorted(
        os.path.join("docs", name) for name in os.listdir(docs) if name.endswith(".md")
    )


def _anchors(path):
    """GitHub's heading anchors of a markdown file: lower case, punctuation but - and _ dropped,
    spaces to -, repeats numbered -1, -2, ... (code blocks skipped)."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"^```.*?^```", "", f.read(), flags=re.MULTILINE | re.DOTALL)
    anchors, counts = set(), {}
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_relative_links_resolve():
    """Every relative link and image of README.md and docs/*.md names a file or folder that
    exists, and a #heading of a markdown file that has it."""
    broken = []
    for page in _markdown_files():
        with open(os.path.join(REPO, page), encoding="utf-8") as f:
            text = re.sub(r"^```.*?^```", "", f.read(), flags=re.MULTILINE | re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            resolved = (
                os.path.normpath(os.path.join(REPO, os.path.dirname(page), path))
                if path
                else os.path.join(REPO, page)
            )
            if not os.path.exists(resolved):
                broken.append(f"{page}: {target} (no {os.path.relpath(resolved, REPO)})")
            elif anchor and resolved.endswith(".md") and anchor not in _anchors(resolved):
                broken.append(f"{page}: {target} (no heading #{anchor})")
    assert not broken, "broken links:\n" + "\n".join(broken)
    assert len(_markdown_files()) >= 10  # the topic pages are found
