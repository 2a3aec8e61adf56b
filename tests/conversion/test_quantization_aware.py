"""Quantization-aware training (issue 31, item 2): `QuantizationAwareClassifier` fits through
int8 fake quantization at the points the integer-only file quantizes, round-trips as .keras,
and converts to the integer-only file with the ranges it learned (no calibration), which
computes what the model computed: LiteRT's logits against the QAT model's own on held-out MR
sentences. On test_integer_only.py's bert_tiny-shaped classifier trained on 2,000 MR sentences."""

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.conversion.integer_only import convert_integer_only, convert_static, integer_forward
from keras_bert_impl.conversion.tflite_targets import TfliteTargets
from keras_bert_impl.layers.activation_ranges import ActivationRanges
from keras_bert_impl.models.integer_forms import IntegerForms, classifier_forward, quantization_points
from tests.conversion import test_integer_only
from tests.conversion.test_integer_only import LENGTH, classifier, run
from tests.harness import save_and_reload

# test_integer_only's module-scoped fixtures, shared (pytest finds fixtures among a module's
# attributes): assigned rather than imported, as the tests' parameters of the same names shadow them.
mr, trained = test_integer_only.mr, test_integer_only.trained


@pytest.fixture(scope="module")
def quantization_aware(mr, trained):
    """The trained classifier (a copy) after one epoch of quantization-aware training on 256 of
    its own training sentences, evenly spaced (both classes), at a small learning rate: 8 steps
    learn every range and move the weights, which is all the tests read (each compares the
    integer file with this model's own forward, not with the float model's accuracy). 256 rows
    are 8 whole batches: a short last batch would trace the fake-quantized training step again."""
    (x, y, _), *_ = mr
    rows = np.linspace(0, len(y) - 1, 256).round().astype(int)
    x, y = {key: value[rows] for key, value in x.items()}, y[rows]
    model, _ = trained
    # Seeded before the copy is built: its dropout layers draw their seeds then, whatever ran before.
    keras.utils.set_random_seed(0)
    copy = classifier(pooling="mean")
    copy.set_weights(model.get_weights())
    qat = kb.QuantizationAwareClassifier(copy)
    qat.compile(optimizer=keras.optimizers.Adam(3e-5))
    before = [w.copy() for w in copy.get_weights()]
    qat.fit(x, y, epochs=1, batch_size=32, verbose=0)
    return qat, before


@pytest.fixture(scope="module")
def qat_logits(mr, quantization_aware):
    """The quantization-aware model's logits on the 300 held-out sentences, predicted once in one
    batch for the tests that compare with them: predicted in batches of 32, its fake-quantized
    graph was traced at two shapes (300 = 9 x 32 + 12), about 18 CPU-s each."""
    *_, (held_out, *_) = mr
    qat, _ = quantization_aware
    return qat.predict(held_out, batch_size=len(held_out["token_ids"]), verbose=0)["logits"]


@pytest.fixture(scope="module")
def qat_file(quantization_aware):
    """The integer-only file of the quantization-aware model (its ranges, no calibration),
    converted once for the tests that read it."""
    qat, _ = quantization_aware
    return convert_integer_only(qat, LENGTH)


def test_float_forms_equal_the_keras_forward():
    """The forms with no quantization are the classifier's function (both poolings, a head
    activation): what QAT's forward is before its fake quantization."""
    ids = np.array([[2, 7, 9, 3, 0, 0], [2, 5, 3, 11, 12, 3]], "int32")
    x = {
        "token_ids": ids,
        "padding_mask": ids > 0,
        "segment_ids": np.array([[0] * 6, [0, 0, 0, 1, 1, 1]], "int32"),
    }
    for pooling, activation in (("pooled", None), ("mean", "softmax")):
        keras.utils.set_random_seed(0)
        model = kb.BertClassifier(
            kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=20),
            num_classes=3,
            pooling=pooling,
            activation=activation,
        )
        key = "logits" if activation is None else "probabilities"
        got = np.asarray(classifier_forward(model, x, IntegerForms())[key])
        assert np.abs(got - np.asarray(model(x)[key])).max() < 1e-5


def test_activation_ranges_move_by_momentum():
    ranges = ActivationRanges(["a"], momentum=0.5)
    assert ranges.untrained() == ["a"]
    x = keras.ops.convert_to_tensor([[0.5, 2.0]])
    # Never trained: inference leaves the tensor float.
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(ranges.fake_quantize("a", x)), [[0.5, 2.0]])
    ranges.fake_quantize("a", x, training=True)  # the first batch sets the range; 0 is always in it
    assert ranges.range_of("a") == (0.0, 2.0)
    ranges.fake_quantize("a", keras.ops.convert_to_tensor([[-4.0, 1.0]]), training=True)
    assert ranges.range_of("a") == (-2.0, 1.5)  # half way to (-4, 1)
    ranges.fake_quantize("a", keras.ops.convert_to_tensor([[-100.0]]))  # inference does not move it
    assert ranges.range_of("a") == (-2.0, 1.5) and ranges.untrained() == []
    # Outside the range the value clips; inside it lands on one of 256 levels.
    y = keras.ops.convert_to_numpy(ranges.fake_quantize("a", keras.ops.convert_to_tensor([[-3.0, 0.3]])))
    step = 3.5 / 255
    assert abs(y[0, 0] + 2.0) < step and abs(y[0, 1] - 0.3) <= step / 2 + 1e-6
    with pytest.raises(ValueError, match=r"momentum must be a number in \[0, 1\). Received: momentum=1.0"):
        ActivationRanges(["a"], momentum=1.0)
    with pytest.raises(ValueError, match="points must be distinct"):
        ActivationRanges(["a", "a"])


@pytest.mark.slow
def test_qat_trains_and_round_trips(mr, quantization_aware, qat_logits):
    *_, (held_out, *_) = mr
    qat, before = quantization_aware
    after = qat.classifier.get_weights()
    assert all(w.shape == b.shape for w, b in zip(after, before))
    assert any(np.abs(w - b).max() > 0 for w, b in zip(after, before)), "QAT did not train the classifier"
    points = quantization_points(qat.classifier)
    # 2 layers: embeddings (2 sums, 14 LayerNorm steps: mean, centred, |centred| (its peak
    # keeps that grid), peak^2, + epsilon, the factor, rescaled, squares, variance, + epsilon,
    # inverse std, normalized, scaled, shifted); a block: Q, K, V, the scaled Q, scores before
    # and after the mask, context, attention output, residual, 14 LayerNorm steps, intermediate,
    # GELU, output, residual, 14 more; the pooled mean and the head.
    assert len(points) == 16 + 2 * 41 + 2 and qat.ranges.untrained() == []
    want = qat_logits
    loaded = save_and_reload(qat)
    assert isinstance(loaded, kb.QuantizationAwareClassifier)
    assert all(np.array_equal(a, b) for a, b in zip(loaded.get_weights(), qat.get_weights()))
    # The reloaded forward against the original's, both called eagerly: a second predict function
    # would trace the fake-quantized graph again (about 18 CPU-s a shape) for the same check.
    logits = [keras.ops.convert_to_numpy(model(held_out)["logits"]) for model in (loaded, qat)]
    np.testing.assert_array_equal(*logits)
    assert loaded.learned_ranges() == qat.learned_ranges()
    # The QAT forward is the integer file's: near the float model's logits, not equal to them.
    float_logits = qat.classifier.predict(held_out, verbose=0)["logits"]
    assert 0 < np.abs(float_logits - want).max() < 0.5


@pytest.mark.slow
def test_integer_only_file_takes_the_learned_ranges(mr, quantization_aware, qat_file, qat_logits):
    """No calibration: every tensor integer, the learned ranges in the file, and LiteRT gives
    the QAT model's top label on 300 held-out sentences (logits within a few int8 steps)."""
    *_, (held_out, y_held_out, _) = mr
    qat, _ = quantization_aware
    flatbuffer = qat_file
    targets = TfliteTargets(flatbuffer)
    assert targets.integer_only and targets.runs_on() == ["CPU", "GPU (shapes)", "integer NPU", "Edge TPU"]
    float_bytes = sum(w.size * 4 for w in qat.classifier.get_weights())
    assert len(flatbuffer) < 0.3 * float_bytes

    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=flatbuffer)
    # The int8 scale of the first attention's scores is the learned range's.
    low, high = qat.ranges.range_of("layer_0/scores")
    scales = [t["quantization"][0] for t in interpreter.get_tensor_details() if t["dtype"] == np.int8]
    assert min(abs(s - (high - low) / 255) for s in scales) < 1e-6 * (high - low)
    got = run(interpreter.get_signature_runner("serving_default"), held_out)["logits"]
    want = qat_logits
    agreement = np.mean(got.argmax(-1) == want.argmax(-1))
    assert agreement >= 0.97, agreement
    assert np.median(np.abs(got - want)) < 0.05, np.median(np.abs(got - want))


@pytest.mark.slow
def test_the_file_rounds_as_the_qat_forward(mr, quantization_aware, qat_file, qat_logits):
    """Every logit of the integer file on the QAT forward's int8 level, on 300 held-out MR
    sentences, through LiteRT's default CPU path (XNNPACK where it takes the op), but for a few
    a level apart: the forward's inference rounds each requantizing op (FULLY_CONNECTED,
    BATCH_MATMUL, ADD, MEAN) as the kernels do, from exact integer accumulators on the file's
    own scales. Rounded once from float values instead, near-ties fell one level apart and
    LayerNorm's variance and RSQRT amplified them: 9.3% of these logits a level off (1.8% now,
    the largest 1.000005 levels; on MiniLM 6.75% of the labels differed, 0.125% now)."""
    *_, (held_out, _, _) = mr
    qat, _ = quantization_aware
    from ai_edge_litert.interpreter import Interpreter

    got = run(Interpreter(model_content=qat_file).get_signature_runner("serving_default"), held_out)["logits"]
    want = qat_logits
    low, high = qat.ranges.range_of("head")
    steps = np.abs(got - want) / ((high - low) / 255)
    assert steps.max() < 1.01, steps.max()
    assert np.mean(steps > 0.5) < 0.05, np.mean(steps > 0.5)
    assert np.mean(got.argmax(-1) == want.argmax(-1)) == 1.0


@pytest.mark.slow
def test_integer_file_computes_the_qat_forward():
    """The QAT model's fake-quantized forward is the function its integer-only file computes:
    on 300 random sentences the file's logits are the forward's on the same int8 level (within
    half a step of the logits' range) and every top label the same. Every constant operand is
    on the grid the converter stores it on (the positions and LayerNorm's gamma and beta on
    their own asymmetric range, not a symmetric one rounded again), and the LayerNorm peak stays
    on the grid of |x - mean|, as TFLite's REDUCE_MAX keeps it: before, the logits of this
    model were up to 5 steps apart (0.48 on average). A random bert_tiny, briefly trained so
    every range is learned."""
    length, vocabulary = 16, 200

    def sentences(count, seed):
        rng = np.random.default_rng(seed)
        lengths = rng.integers(4, length + 1, count)
        mask = (np.arange(length)[None] < lengths[:, None]).astype("int32")
        ids = rng.integers(5, vocabulary, (count, length)).astype("int32") * mask
        ids[:, 0] = 2
        ids[np.arange(count), lengths - 1] = 3
        return {"token_ids": ids, "padding_mask": mask, "segment_ids": np.zeros_like(ids)}

    keras.utils.set_random_seed(0)
    backbone = kb.BertBackbone.from_preset(
        "bert_tiny", vocabulary_size=vocabulary, max_sequence_length=length
    )
    qat = kb.QuantizationAwareClassifier(kb.BertClassifier(backbone, num_classes=2), momentum=0.9)
    qat.compile(optimizer=keras.optimizers.Adam(1e-4))
    train = sentences(512, 1)
    qat.fit(train, train["token_ids"][:, 1] % 2, epochs=2, batch_size=32, verbose=0)
    x = sentences(300, 2)
    want = np.asarray(qat.predict(x, batch_size=100, verbose=0)["logits"])

    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_content=convert_integer_only(qat, length)).get_signature_runner(
        "serving_default"
    )
    got = np.concatenate(
        [
            runner(
                ids=x["token_ids"][i : i + 1],
                mask=x["padding_mask"][i : i + 1],
                segment_ids=x["segment_ids"][i : i + 1],
            )["logits"]
            for i in range(300)
        ]
    )
    low, high = qat.ranges.range_of("head")
    steps = np.abs(got - want).max() / ((high - low) / 255)
    assert steps < 0.5, steps
    assert np.mean(got.argmax(-1) == want.argmax(-1)) == 1.0


@pytest.mark.slow
def test_refusals(quantization_aware):
    qat, _ = quantization_aware
    tagger = kb.BertTokenClassifier(
        kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=20), num_classes=3
    )
    with pytest.raises(ValueError, match="for a BertClassifier.*Received: classifier=BertTokenClassifier"):
        kb.QuantizationAwareClassifier(tagger)
    fresh = kb.QuantizationAwareClassifier(classifier())
    with pytest.raises(
        ValueError, match="activation ranges were never trained.*Fit the QuantizationAwareClassifier"
    ):
        convert_integer_only(fresh, LENGTH)
    # It predicts through its own fake quantization (fp32) or its integer-only file (int8, once its
    # ranges are trained); bf16 and fp32 on litert would run its float classifier (forward_resolver.py).
    from keras_bert_impl.inference import TextPredictor

    for precision, runtime, refusal in (
        (
            "int8",
            None,
            "precision int8 runs this quantization-aware model's "
            "integer-only file, which needs the activation ranges",
        ),
        ("fp32", "litert", "runtime litert would run this quantization-aware model's float classifier"),
        ("bf16", None, "precision bf16 would run a bfloat16 copy"),
    ):
        with pytest.raises(ValueError, match=refusal):
            TextPredictor(fresh, precision=precision, runtime=runtime)
    with pytest.raises(ValueError, match="converts to int8_only.*Received: quantization='int16x8_only'"):
        convert_integer_only(qat, LENGTH, None, "int16x8_only")
    with pytest.raises(ValueError, match="give no calibration_inputs"):
        convert_integer_only(qat, LENGTH, [{"ids": np.zeros((1, LENGTH), "int32")}])
    # The float files of a QAT model are its float classifier's.
    assert len(convert_static(qat, LENGTH, "float16_gpu")) > 0
    assert integer_forward(qat, LENGTH) is not None


def test_a_file_of_other_quantization_points_is_refused_naming_the_fix(tmp_path, monkeypatch):
    """A QAT model saved when the points differed (before the LayerNorm peak lost its own range)
    fails to load in one line that says to fine-tune again, not as Keras' variable count."""
    from keras_bert_impl.commands.model_files import load_model
    from keras_bert_impl.damaged_file_error import DamagedFileError
    from keras_bert_impl.models import quantization_aware_classifier

    backbone = kb.BertBackbone(
        vocabulary_size=30,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=8,
    )
    qat = kb.QuantizationAwareClassifier(kb.BertClassifier(backbone, num_classes=2))
    ids = np.ones((1, 4), "int32")
    qat({"token_ids": ids, "segment_ids": ids * 0, "padding_mask": ids})
    path = str(tmp_path / "older.keras")
    qat.save(path)
    points = quantization_aware_classifier.quantization_points
    monkeypatch.setattr(quantization_aware_classifier, "quantization_points", lambda c: points(c)[:-1])
    with pytest.raises(DamagedFileError) as e:
        load_model(path)
    message = str(e.value)
    assert "\n" not in message and "Fine-tune it again with `kbert finetune --qat`" in message, message


@pytest.mark.slow
def test_a_cls_pooled_qat_classifier_converts_and_its_file_is_its_forward():
    """BERT's default [CLS]-pooled head: the integer-only file of a one-layer QAT classifier of
    hidden size 16 converts and gives its QAT forward's logits exactly. The [CLS] row was a
    STRIDED_SLICE, which the converter refused for these learned ranges ("quantization parameters
    violate the same scale constraint", its two roundings of one scale a float32 unit apart)."""
    from ai_edge_litert.interpreter import Interpreter

    keras.utils.set_random_seed(0)
    backbone = kb.BertBackbone(
        vocabulary_size=200,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=64,
        dropout=0.1,
    )
    qat = kb.QuantizationAwareClassifier(kb.BertClassifier(backbone, num_classes=2))
    rng = np.random.default_rng(0)

    def batch(rows, padded):
        ids = rng.integers(4, 200, (rows, 12)).astype("int32")
        ids[:, 0], ids[:, -1] = 2, 3
        mask = np.ones_like(ids)
        mask[padded:, 8:], ids[padded:, 8:] = 0, 0
        return {"token_ids": ids, "padding_mask": mask, "segment_ids": np.zeros_like(ids)}

    qat(batch(16, 16), training=True)  # one training batch sets the ranges
    held_out = batch(24, 12)
    interpreter = Interpreter(model_content=convert_integer_only(qat, 12))
    got = run(interpreter.get_signature_runner("serving_default"), held_out)["logits"]
    np.testing.assert_array_equal(got, qat.predict(held_out, verbose=0)["logits"])
