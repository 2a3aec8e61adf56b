"""`kbert serve --precision int8`'s calls (the wing's `precision_export.litert_functions`): each
runs the int8 forward at its own longest row, not the padded sequence length the signatures hand
it, with the outputs of the padded call; a row with no unmasked token does not break the call."""

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl_export.precision_export import litert_functions
from keras_bert_impl.inference import LiteRtForward
from tests.commands.conftest import save_small_bert

SEQ_LEN = 32


def test_int8_calls_run_at_their_longest_row_with_the_padded_outputs(tmp_path, monkeypatch):
    keras.utils.set_random_seed(0)
    model = kb.BertClassifier(keras.saving.load_model(save_small_bert(tmp_path)), num_classes=2)
    widths = []
    run = LiteRtForward.__call__

    def recording(self, token_ids, segment_ids, padding_mask):
        widths.append(np.shape(token_ids)[1])
        return run(self, token_ids, segment_ids, padding_mask)

    monkeypatch.setattr(LiteRtForward, "__call__", recording)
    call = litert_functions(model, "mr", SEQ_LEN, pair=False)["mr_ids"]["serving_default"]
    ids = np.zeros((3, SEQ_LEN), np.int32)
    ids[0, :6] = [101, 2023, 3185, 2001, 2307, 102]
    ids[1, :4] = [101, 9643, 999, 102]
    mask = (ids > 0).astype(np.int32)
    logits = np.asarray(call(ids=ids[:2], mask=mask[:2], segment_ids=np.zeros_like(ids[:2]))["logits"])
    assert widths[-1] == 6, widths
    assert logits.shape == (2, 2) and np.isfinite(logits).all()
    # Row 2 has no unmasked token (a client's ids call): it attends to every column it is given,
    # so the call is not cut (cut to the other rows' 6 columns, its answer depended on which
    # clients shared its call: audit finding 10), and its answer is the one it gets alone.
    segments = np.zeros_like(ids)
    merged = np.asarray(call(ids=ids, mask=mask, segment_ids=segments)["logits"])
    assert widths[-1] == SEQ_LEN, widths
    alone = np.asarray(call(ids=ids[2:], mask=mask[2:], segment_ids=segments[2:])["logits"])
    assert widths[-1] == SEQ_LEN and np.isfinite(alone).all(), widths
    np.testing.assert_allclose(merged[2:], alone, atol=1e-6)
    # The same int8 file at the padded width: attention and pooling ignore padding, and XNNPACK
    # quantizes activations per token, so the cut changes the logits by float rounding only.
    monkeypatch.setattr(LiteRtForward, "__call__", run)
    padded = LiteRtForward(model, num_threads=1)(ids, np.zeros_like(ids), mask)["logits"]
    np.testing.assert_allclose(logits[:2], padded[:2], atol=1e-4)
    # A client may pad on the left: the call runs up to the last column any row uses (cut at the
    # longest row's count of 6, it lost this row's tokens and answered another label), with the
    # outputs of the whole padded width.
    left = np.zeros((2, SEQ_LEN), np.int32)
    left[0, :6] = ids[0, :6]
    left[1, 4:10] = ids[0, :6]
    left_mask = (left > 0).astype(np.int32)
    monkeypatch.setattr(LiteRtForward, "__call__", recording)
    left_logits = np.asarray(call(ids=left, mask=left_mask, segment_ids=np.zeros_like(left))["logits"])
    assert widths[-1] == 10, widths
    monkeypatch.setattr(LiteRtForward, "__call__", run)
    whole = LiteRtForward(model, num_threads=1)(left, np.zeros_like(left), left_mask)["logits"]
    np.testing.assert_allclose(left_logits, whole, atol=1e-4)


def test_int8_calls_refuse_ids_of_no_column_or_more_than_the_model_positions(tmp_path):
    """The SavedModel's graph answers these with a 400; LiteRT failed inside XNNPACK (a 500)."""
    keras.utils.set_random_seed(0)
    model = kb.BertClassifier(keras.saving.load_model(save_small_bert(tmp_path)), num_classes=2)
    call = litert_functions(model, "mr", SEQ_LEN, pair=False)["mr_ids"]["serving_default"]
    positions = model.backbone.max_sequence_length
    for width in (0, positions + 1):
        ones = np.ones((2, width), np.int32)
        with pytest.raises(ValueError) as error:
            call(ids=ones * 5, mask=ones, segment_ids=ones * 0)
        assert f"Input ids has {width} positions per example: this model takes 1 to {positions}" in str(
            error.value
        ), str(error.value)


def test_int8_calls_refuse_ids_outside_the_model_tables(tmp_path):
    """The SavedModel's graph refuses such ids (HTTP 400); LiteRT's gather failed inside the interpreter
    (a 500) or read a row that is not the token's without a word."""
    keras.utils.set_random_seed(0)
    model = kb.BertClassifier(keras.saving.load_model(save_small_bert(tmp_path)), num_classes=2)
    call = litert_functions(model, "mr", SEQ_LEN, pair=False)["mr_ids"]["serving_default"]
    size = model.backbone.vocabulary_size
    for name, value, expected in (
        ("ids", -1, "[0, " + str(size) + ")"),
        ("ids", size, f"[0, {size})"),
        ("segment_ids", 2, "[0, 2)"),
        ("mask", 3, "[0, 2)"),
    ):
        inputs = {
            "ids": np.full((2, SEQ_LEN), 5, np.int32),
            "mask": np.ones((2, SEQ_LEN), np.int32),
            "segment_ids": np.zeros((2, SEQ_LEN), np.int32),
        }
        inputs[name][1, 7] = value
        with pytest.raises(ValueError) as error:
            call(**inputs)
        assert (
            f"Input {name} holds {value} at example 1, position 7: this model takes values in {expected} "
            "there" in str(error.value)
        ), str(error.value)


def test_int8_calls_refuse_inputs_of_different_shapes(tmp_path):
    """A mask narrower than the ids cut the call to the mask's width, dropping the ids' last
    columns without a word; segment_ids of more rows failed inside XNNPACK (a 500). The message is
    the export graph's (tests/export/test_heads.py)."""
    keras.utils.set_random_seed(0)
    model = kb.BertClassifier(keras.saving.load_model(save_small_bert(tmp_path)), num_classes=2)
    call = litert_functions(model, "mr", SEQ_LEN, pair=False)["mr_ids"]["serving_default"]
    ids = np.full((2, 10), 5, np.int32)
    for name, mask, segment_ids, shape in (
        ("mask", np.ones((2, 9), np.int32), np.zeros((2, 10), np.int32), "2 9"),
        ("segment_ids", np.ones((2, 10), np.int32), np.zeros((3, 10), np.int32), "3 10"),
    ):
        with pytest.raises(ValueError) as error:
            call(ids=ids, mask=mask, segment_ids=segment_ids)
        assert (
            f"Input {name} has shape [{shape}], and ids [2 10]: send ids, mask and segment_ids of one shape"
            in str(error.value)
        ), str(error.value)
