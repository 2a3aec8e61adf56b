"""The 400 bodies of `kbert serve` carry the one sentence a layer raised: under `--precision
int8` and `--runtime litert` the raw-text calls run BertPreprocessor eagerly, and a text that is
not UTF-8 answered Keras' wrapper ("Exception encountered when calling BertPreprocessor.call()",
terminal bold codes, "Arguments received by ...") inside the JSON."""

import keras
import pytest
import tensorflow as tf

import keras_bert_impl as kb
from keras_bert_impl_export.precision_export import litert_functions
from keras_bert_lite.serve.model_server import client_error_message
from keras_bert_lite.serve.rest_api import error_sentence
from tests.commands.conftest import save_small_bert


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    keras.utils.set_random_seed(0)
    return kb.BertClassifier(
        keras.saving.load_model(save_small_bert(tmp_path_factory.mktemp("tiny"))), num_classes=2
    )


@pytest.mark.parametrize(
    "quantization",
    [  # --precision int8, --runtime litert
        pytest.param("dynamic_int8", marks=pytest.mark.slow),  # about 20 s or more: an int8 conversion
        "float32",
    ],
)
def test_a_text_that_is_not_utf8_gets_one_clean_sentence(classifier, quantization):
    call = litert_functions(classifier, "mr", 16, pair=False, quantization=quantization)["mr"][
        "serving_default"
    ]
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        call(
            text=tf.constant([b"a fine film", b"caf\xe9 au lait"])
        )  # latin-1, as a {"b64": ...} input sends it
    assert "Exception encountered when calling" in str(raised.value)  # what Keras raises: the wrapper
    for first_row in (0, 32):
        body = client_error_message(raised.value, first_row)
        assert body.startswith(
            "BertPreprocessor: input text is not valid UTF-8. Decode the source with its real encoding"
        ), body
        assert (
            "\x1b" not in body and "Exception encountered" not in body and "Arguments received" not in body
        ), body
        assert "\n" not in body and "First invalid row of the batch: 1" in body, body


def test_error_sentence_unwraps_nested_wrappers_and_leaves_other_messages_alone():
    inner = (
        "Exception encountered when calling Inner.call().\n\n\x1b[1mids must be int32.\x1b[0m\n\n"
        "Arguments received by Inner.call():\n  • x=tf.Tensor(shape=(1,), dtype=float32)"
    )
    outer = (
        f"Exception encountered when calling Outer.call().\n\n\x1b[1m{inner}\x1b[0m\n\n"
        "Arguments received by Outer.call():\n  • inputs={'ids': 'tf.Tensor(shape=(1,), dtype=float32)'}"
    )
    assert error_sentence(ValueError(outer)) == "ids must be int32."
    assert (
        error_sentence(ValueError("indices[3] = 40000 is not in\n [0, 30522)"))
        == "indices[3] = 40000 is not in [0, 30522)"
    )
