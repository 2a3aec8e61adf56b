"""LiteRtForward's calls check their ids (keras_bert_impl/inference/id_checks.py): the interpreter
does not. Before, a negative id gave logits without a word, and an id past the vocabulary, a
segment id past the segment table or more positions than the model has failed as LiteRT's
"gather index out of bounds ... (GATHER) failed to invoke" RuntimeError, naming no input, its
text repeated once for every earlier failed call."""

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.inference import LiteRtForward
from keras_bert_impl.inference.id_checks import check_id_arrays


@pytest.fixture(scope="module")
def forward():
    keras.utils.set_random_seed(0)
    backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100, max_sequence_length=16)
    model = kb.BertClassifier(backbone, num_classes=2)
    ids = np.array([[2, 7, 3, 0]], "int32")
    model({"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": ids > 0})
    return LiteRtForward(model, num_threads=1, cache=None)


def _inputs(width=6):
    ids = np.full((2, width), 7, np.int32)
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}


@pytest.mark.parametrize(
    "name, value, size",
    [
        ("token_ids", -1, 100),
        ("token_ids", -100, 100),
        ("token_ids", 100, 100),
        ("segment_ids", 2, 2),
        ("padding_mask", 3, 2),
        ("padding_mask", -1, 2),
    ],
)
def test_a_value_outside_its_table_is_named_and_the_forward_still_runs(forward, name, value, size):
    x = _inputs()
    x[name][1, 4] = value
    with pytest.raises(ValueError) as error:
        forward(**x)
    assert str(error.value) == (
        f"Input {name} holds {value} at example 1, position 4: this model takes values in [0, {size}) there."
    )
    assert forward(**_inputs())["logits"].shape == (2, 2)


def test_shapes_and_widths_the_model_cannot_take_are_named(forward):
    x = _inputs()
    x["padding_mask"] = x["padding_mask"][:, :5]
    with pytest.raises(
        ValueError,
        match=r"Input padding_mask has shape \[2 5\], and token_ids \[2 6\]: send "
        r"token_ids, segment_ids and padding_mask of one shape",
    ):
        forward(**x)
    for width in (0, 17):
        with pytest.raises(
            ValueError,
            match=f"Input token_ids has {width} positions per example: this model takes "
            r"1 to 16 \(its max_sequence_length\)",
        ):
            forward(**_inputs(width))
    x = _inputs()
    x["token_ids"] = x["token_ids"][0]
    with pytest.raises(
        ValueError, match=r"Input token_ids has shape \[6\]: send \[examples, positions\] of ids"
    ):
        forward(**x)


def test_names_can_be_shown_as_a_client_sent_them():
    ids = np.array([[101, 7, 102]])
    with pytest.raises(ValueError) as error:
        check_id_arrays(
            {"token_ids": ids, "padding_mask": np.array([[1, 1, 2]])},
            {"token_ids": 30522, "padding_mask": 2},
            512,
            shown_as={"token_ids": "ids", "padding_mask": "mask"},
        )
    assert (
        str(error.value)
        == "Input mask holds 2 at example 0, position 2: this model takes values in [0, 2) there."
    )
