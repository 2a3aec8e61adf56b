"""Attention maps of the real all-MiniLM-L6-v2: the probabilities, the PNG views and the HTML
page, opened in headless Chromium."""

import os
import re
import subprocess

import numpy as np
import pytest

from keras_bert_impl.inspection.attention_html import write_attention_html
from keras_bert_impl.inspection.attention_maps import AttentionMaps
from keras_bert_impl.inspection.attention_plot import plot_attention
from keras_bert_impl.models import BertBackbone
from keras_bert_impl.tokenization import BertPreprocessor
from tests.run_once import make_target

ANIMAL = "The animal didn't cross the street because it was too tired"


@pytest.fixture(scope="module")
def animal(minilm):
    return AttentionMaps.compute(minilm, ANIMAL)


def test_tokens_and_rows_sum_to_one_over_the_real_tokens(animal):
    assert animal.tokens == [
        "[CLS]",
        "the",
        "animal",
        "didn",
        "'",
        "t",
        "cross",
        "the",
        "street",
        "because",
        "it",
        "was",
        "too",
        "tired",
        "[SEP]",
    ]
    assert animal.probabilities.shape == (6, 12, 15, 15) and not animal.truncated
    np.testing.assert_allclose(animal.probabilities.sum(-1), 1.0, atol=1e-5)
    assert animal.probabilities.min() >= 0.0


def test_padding_does_not_change_the_maps(minilm, animal):
    """The trimmed maps equal the unpadded block of a run padded to 32 with another, longer
    sentence in the batch, and padded columns get no attention."""
    x = BertPreprocessor(minilm.vocabulary, lowercase=True, sequence_length=32)(
        [ANIMAL, "a much longer sentence that is here only so that the batch has padding in its first row ."]
    )
    model = BertBackbone.from_config({**minilm.get_config(), "return_attention_scores": True})
    model.set_weights(minilm.get_weights())
    padded = np.asarray(model(x)["attention_probs"])[0]  # [L, N, 32, 32]
    np.testing.assert_allclose(padded[:, :, :15, :15], animal.probabilities, atol=1e-5)
    assert padded[:, :, :15, 15:].max() < 1e-6


def test_pair_segments_and_truncation(minilm):
    maps = AttentionMaps.compute(
        minilm, "The animal didn't cross the street", text_b="because it was too tired", sequence_length=8
    )
    assert maps.tokens == ["[CLS]", "the", "animal", "didn", "[SEP]", "because", "it", "[SEP]"]
    assert maps.segment_ids == [0, 0, 0, 0, 0, 1, 1, 1] and maps.truncated


def _png_pixels(path):
    from matplotlib.image import imread

    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    return imread(path)


@pytest.mark.parametrize(
    "layer, head, minimum", [(2, 3, (500, 500)), (4, None, (900, 1200)), (None, None, (800, 1500))]
)
def test_png_views(animal, tmp_path, layer, head, minimum):
    path = str(tmp_path / "attention.png")
    assert plot_attention(animal, path, layer=layer, head=head) == (layer, head)
    pixels = _png_pixels(path)
    assert pixels.shape[0] >= minimum[0] and pixels.shape[1] >= minimum[1]
    assert pixels[..., :3].std() > 0.1  # a picture, not a blank canvas


def test_bad_layer_and_head(animal, tmp_path):
    with pytest.raises(ValueError, match=r"layer must be in \[0, 5\].*Received: layer=6"):
        plot_attention(animal, str(tmp_path / "a.png"), layer=6)
    with pytest.raises(ValueError, match=r"head must be in \[0, 11\].*Received: head=12"):
        plot_attention(animal, str(tmp_path / "a.png"), layer=0, head=12)
    with pytest.raises(ValueError, match="head needs a layer"):
        plot_attention(animal, str(tmp_path / "a.png"), head=1)
    assert not os.listdir(tmp_path)


@pytest.fixture(scope="module")
def chromium():
    """Debian's chromium, installed by `make edge-setup` when missing (quick when done)."""
    error = make_target("edge-setup")
    if error:
        pytest.fail(error)
    return "chromium"


def test_html_page_runs_in_headless_chromium(animal, tmp_path, chromium):
    """The page draws its lines and heatmap without a JavaScript error, and asks for nothing
    over the network (its Content-Security-Policy forbids it; no URL in it to ask for)."""
    path = str(tmp_path / "attention.html")
    write_attention_html(animal, path, title="it -> animal </script>", layer=5, head=11)
    with open(path, encoding="utf-8") as f:
        page = f.read()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert page.count("</script>") == 2  # the title's "</script>" is escaped, the data's "<" too
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            "file://" + path,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Uncaught" not in done.stderr, done.stderr[-2000:]
    dom = done.stdout
    assert 'data-ready="true"' in dom  # the script ran to its end
    lines = len(re.findall(r"<line ", dom))
    # Layer 5, head 11 drawn: one line per pair with probability >= 0.01 (the page holds them to
    # 4 decimals), the tokens twice, a 15 x 15 heatmap.
    shown = np.array(animal.to_dict()["probabilities"])[5, 11]  # what the page holds, as JavaScript's doubles
    assert lines == int((shown >= 0.01).sum())
    assert len(re.findall(r"<text ", dom)) == 30
    assert len(re.findall(r"<td ", dom)) == 15 * 15


def test_a_head_resolves_it_to_the_animal(animal):
    """The picture committed as docs/attention_animal_l5h11.png: in MiniLM's last layer, head 11
    gives "it" most of its attention on "animal" (0.65, `make look-inside-pictures`)."""
    row = animal.probabilities[5, 11, animal.tokens.index("it")]
    words = [i for i, t in enumerate(animal.tokens) if t not in ("[CLS]", "[SEP]", "it")]
    assert (
        animal.tokens[max(words, key=lambda i: row[i])] == "animal"
        and row[animal.tokens.index("animal")] > 0.5
    )
