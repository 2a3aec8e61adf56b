"""Runs the model code on one Keras backend, in a venv without TensorFlow (JAX or PyTorch).

tests/backends/test_backends.py starts it as a subprocess with KERAS_BACKEND set and the
repository on PYTHONPATH; it prints one JSON object (or writes arrays to .npz files) for the
test to check. It imports keras, numpy and keras_bert_impl only: what it runs is what runs
on a machine with no TensorFlow, such as the GPU machine of bench/gpu/.

    python tests/backends/backend_child.py forward MODEL.keras INPUTS.npz OUT.npz
    python tests/backends/backend_child.py workout WORKDIR [MODEL.keras INPUTS.npz OUT.npz]
    python tests/backends/backend_child.py data-parallel   (JAX, two host devices)
    python tests/backends/backend_child.py edges TEXT_IN.keras
"""

import json
import os
import sys

import keras
import numpy as np

import keras_bert_impl as kb
from keras_bert_impl.backend_support import TensorFlowOnlyError
from keras_bert_impl.training import WarmupPolynomialDecay, create_optimizer

VOCABULARY = 60
BATCH, LENGTH = 8, 12


def tiny_config(**overrides):
    config = dict(
        vocabulary_size=VOCABULARY,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=32,
    )
    config.update(overrides)
    return config


def inputs(seed=0):
    """Backbone inputs: two segments, the last two positions of every row padded."""
    rng = np.random.default_rng(seed)
    padding_mask = np.ones((BATCH, LENGTH), "int32")
    padding_mask[:, -2:] = 0
    segment_ids = np.zeros((BATCH, LENGTH), "int32")
    segment_ids[:, LENGTH // 2 :] = 1
    token_ids = rng.integers(1, VOCABULARY, (BATCH, LENGTH)).astype("int32")
    return {
        "token_ids": token_ids * padding_mask,
        "segment_ids": segment_ids * padding_mask,
        "padding_mask": padding_mask,
    }


def numpy_outputs(outputs):
    return {key: keras.ops.convert_to_numpy(value) for key, value in outputs.items()}


def forward(model_path, inputs_path, out_path):
    """The outputs of a saved model (a .keras written on any backend) on saved inputs."""
    model = keras.saving.load_model(model_path)
    with np.load(inputs_path) as data:
        x = {key: data[key] for key in data.files}
    np.savez(out_path, **numpy_outputs(model(x, training=False)))


def heads(rng):
    """Every head with its fit targets: (name, model, x, y, sample_weight)."""
    x = inputs()
    pretraining_x = dict(x, mask_positions=rng.integers(1, LENGTH - 2, (BATCH, 3)).astype("int32"))
    return [
        (
            "classifier",
            kb.BertClassifier(kb.BertBackbone(**tiny_config()), num_classes=3),
            x,
            rng.integers(0, 3, BATCH),
            None,
        ),
        (
            "classifier_mean_pooling",
            kb.BertClassifier(kb.BertBackbone(**tiny_config()), num_classes=3, pooling="mean"),
            x,
            rng.integers(0, 3, BATCH),
            None,
        ),
        (
            "multi_label_classifier",
            kb.BertClassifier(kb.BertBackbone(**tiny_config()), num_classes=3, multi_label=True),
            x,
            rng.integers(0, 2, (BATCH, 3)).astype("float32"),
            None,
        ),
        (
            "token_classifier",
            kb.BertTokenClassifier(kb.BertBackbone(**tiny_config()), num_classes=4),
            x,
            rng.integers(0, 4, (BATCH, LENGTH)),
            x["padding_mask"].astype("float32"),
        ),
        (
            "span_labeler",
            kb.BertSpanLabeler(kb.BertBackbone(**tiny_config())),
            x,
            {
                "start_logits": rng.integers(0, LENGTH - 2, BATCH),
                "end_logits": rng.integers(0, LENGTH - 2, BATCH),
            },
            None,
        ),
        (
            "pretrainer",
            kb.BertPretrainer(kb.BertBackbone(**tiny_config())),
            pretraining_x,
            {"mlm_logits": rng.integers(0, VOCABULARY, (BATCH, 3)), "nsp_logits": rng.integers(0, 2, BATCH)},
            {"mlm_logits": np.array([[1, 1, 0]] * BATCH, "float32"), "nsp_logits": np.ones(BATCH, "float32")},
        ),
    ]


def train_and_reload(model, x, y, sample_weight, workdir, name):
    """Three epochs of fit with BERT's optimizer, then a .keras round trip. Returns the report."""
    model.compile(
        optimizer=create_optimizer(1e-3, train_steps=6, warmup_steps=2),
        loss=model.default_loss(),
        metrics=model.default_metrics(),
        weighted_metrics=model.default_weighted_metrics(),
    )
    before = [keras.ops.convert_to_numpy(w) for w in model.trainable_weights]
    history = model.fit(x, y, sample_weight=sample_weight, batch_size=4, epochs=3, shuffle=False, verbose=0)
    changed = sum(
        not np.array_equal(b, keras.ops.convert_to_numpy(w)) for b, w in zip(before, model.trainable_weights)
    )
    path = os.path.join(workdir, f"{name}.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    ours, theirs = numpy_outputs(model(x, training=False)), numpy_outputs(reloaded(x, training=False))
    return {
        "losses": [float(v) for v in history.history["loss"]],
        "weights_changed": changed,
        "weights": len(before),
        "reload_max_abs_diff": max(float(np.max(np.abs(ours[k] - theirs[k]))) for k in ours),
        "outputs": sorted(ours),
    }


def distillers(workdir):
    """The Distiller with every transfer term, through fit, on heads (task distillation, saved
    and reloaded) and on backbones (general distillation)."""
    x, y = inputs(), np.random.default_rng(1).integers(0, 3, BATCH)
    report = {}
    teacher = kb.BertClassifier(kb.BertBackbone(**tiny_config()), num_classes=3)
    student = kb.BertClassifier(kb.BertBackbone(**tiny_config(num_layers=1, hidden_dim=8)), num_classes=3)
    distiller = kb.Distiller(
        teacher,
        student,
        [kb.LogitsTerm(alpha=0.5), kb.HiddenStatesTerm(1.0), kb.AttentionTerm(1.0), kb.EmbeddingTerm(1.0)],
    )
    distiller.compile(optimizer=create_optimizer(1e-3, train_steps=6, warmup_steps=2))
    history = distiller.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0).history
    report["distiller"] = {key: [float(v) for v in values] for key, values in history.items()}
    path = os.path.join(workdir, "distiller.keras")
    distiller.save(path)
    reloaded = keras.saving.load_model(path)
    report["distiller"]["reload_max_abs_diff"] = float(
        np.max(
            np.abs(
                numpy_outputs(distiller.student(x))["logits"] - numpy_outputs(reloaded.student(x))["logits"]
            )
        )
    )
    general = kb.Distiller(
        kb.BertBackbone(**tiny_config()),
        kb.BertBackbone(**tiny_config(num_layers=1, hidden_dim=8)),
        [kb.HiddenStatesTerm(1.0), kb.AttentionTerm(1.0), kb.EmbeddingTerm(1.0)],
    )
    general.compile(optimizer=create_optimizer(1e-3, train_steps=6, warmup_steps=2))
    history = general.fit(x, batch_size=4, epochs=3, shuffle=False, verbose=0).history
    report["general_distiller"] = {key: [float(v) for v in values] for key, values in history.items()}
    return report


def refusals():
    """What the TensorFlow-only parts answer on this backend (the message, or 'ran')."""
    attempts = {
        "BertPreprocessor": lambda: (
            __import__("keras_bert_impl.tokenization", fromlist=["x"]).BertPreprocessor
        ),
        "keras_bert_impl.data": lambda: __import__("keras_bert_impl.data.readers"),
        "keras_bert_impl.inference": lambda: __import__("keras_bert_impl.inference"),
        "create_strategy": lambda: __import__("keras_bert_impl.training", fromlist=["x"]).create_strategy(
            "one-device"
        ),
        "keras_bert_impl_export": lambda: __import__("keras_bert_impl_export"),
    }
    answers = {}
    for name, attempt in attempts.items():
        try:
            attempt()
            answers[name] = "ran"
        except TensorFlowOnlyError as error:
            answers[name] = str(error)
    return answers


def workout(workdir):
    """Every layer, head, distiller and the optimizer on this backend; a classifier saved here
    for the TensorFlow side to load."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    report = {"backend": keras.backend.backend(), "tensorflow_imported": False}
    backbone = kb.BertBackbone(**tiny_config(return_hidden_states=True, return_attention_scores=True))
    outputs = numpy_outputs(backbone(inputs()))
    report["backbone_shapes"] = {key: list(value.shape) for key, value in outputs.items()}
    probs = outputs["attention_probs"]  # [B, L, N, T, T]: padded keys get exactly 0
    report["attention_on_padding"] = float(np.max(probs[..., -2:]))
    report["attention_row_sums"] = [float(probs.sum(-1).min()), float(probs.sum(-1).max())]
    attention = kb.layers.MultiHeadAttention(num_heads=2, hidden_dim=8)
    _, causal = attention(np.ones((1, 4, 8), "float32"), use_causal_mask=True, return_attention_scores=True)
    report["causal_upper_triangle"] = float(np.max(np.triu(keras.ops.convert_to_numpy(causal)[0, 0], 1)))
    cross = attention(np.ones((1, 3, 8), "float32"), value=np.ones((1, 5, 8), "float32"))
    report["cross_attention_shape"] = list(cross.shape)
    # Without probabilities out, JAX takes the fused ops.dot_product_attention: it must give
    # the explicit softmax path's output under every mask (other backends take one path).
    attention = kb.layers.MultiHeadAttention(num_heads=2, hidden_dim=8)
    draws = np.random.default_rng(1)
    query, value = (
        draws.normal(size=(2, 5, 8)).astype("float32"),
        draws.normal(size=(2, 7, 8)).astype("float32"),
    )
    padding = np.array([[1] * 7, [1] * 4 + [0] * 3], "int32")
    cases = {
        "padding": dict(query=query, value=None, padding_mask=padding[:, :5]),
        "causal": dict(query=query, value=None, use_causal_mask=True),
        "causal_and_padding": dict(
            query=query, value=None, use_causal_mask=True, padding_mask=padding[:, :5]
        ),
        "cross_with_padding": dict(query=query, value=value, padding_mask=padding),
    }
    report["fused_minus_explicit"] = {
        name: float(
            np.max(
                np.abs(
                    keras.ops.convert_to_numpy(attention(**case))
                    - keras.ops.convert_to_numpy(attention(**case, return_attention_scores=True)[0])
                )
            )
        )
        for name, case in cases.items()
    }
    report["heads"] = {
        name: train_and_reload(model, x, y, weight, workdir, name) for name, model, x, y, weight in heads(rng)
    }
    embedder = kb.BertEmbedder(kb.BertBackbone(**tiny_config()), pooling="mean")
    vectors = numpy_outputs(embedder(inputs()))["embeddings"]
    report["embedder_norms"] = [float(v) for v in np.linalg.norm(vectors, axis=-1)]
    report.update(distillers(workdir))
    schedule = WarmupPolynomialDecay(5e-5, decay_steps=1000, warmup_steps=100)
    report["schedule"] = [
        float(keras.ops.convert_to_numpy(schedule(step))) for step in (0, 50, 100, 550, 1000, 2000)
    ]
    # A trained classifier and its outputs, for the TensorFlow side to load and export.
    classifier = kb.BertClassifier(
        kb.BertBackbone(**tiny_config()), num_classes=2, label_names=["neg", "pos"]
    )
    # A vocabulary of its size, so that `kbert export` can build the raw-text signatures.
    words = [f"w{i}" for i in range(VOCABULARY - 5)]
    classifier.backbone.set_vocabulary(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words, lowercase=True)
    x = inputs(seed=3)
    classifier.fit(x, rng.integers(0, 2, BATCH), batch_size=4, epochs=1, verbose=0)
    classifier.save(os.path.join(workdir, "saved_here.keras"))
    np.savez(os.path.join(workdir, "saved_here_inputs.npz"), **x)
    np.savez(os.path.join(workdir, "saved_here_outputs.npz"), **numpy_outputs(classifier(x, training=False)))
    report["refusals"] = refusals()
    report["tensorflow_imported"] = "tensorflow" in sys.modules
    print(json.dumps(report))


def data_parallel():
    """Per-step losses of the same fits on one device and under keras.distribution.DataParallel
    over every device (XLA_FLAGS=--xla_force_host_platform_device_count=2 gives two)."""
    import jax

    rng = np.random.default_rng(0)
    x = {key: np.concatenate([value, value[::-1]]) for key, value in inputs().items()}  # 16 rows
    x["padding_mask"][::3, 5:] = 0  # rows of different lengths: the replicas' shares differ
    x["token_ids"] *= x["padding_mask"]
    batch = len(x["token_ids"])
    pretraining_x = dict(x, mask_positions=rng.integers(1, 5, (batch, 3)).astype("int32"))
    weights = rng.integers(0, 2, (batch, 3)).astype("float32")  # a different number of real slots per row
    weights[:, 0] = 1.0
    tasks = {
        "classifier": (
            lambda: kb.BertClassifier(kb.BertBackbone(**tiny_config(dropout=0.0)), num_classes=3),
            x,
            rng.integers(0, 3, batch),
            None,
        ),
        "pretrainer": (
            lambda: kb.BertPretrainer(kb.BertBackbone(**tiny_config(dropout=0.0))),
            pretraining_x,
            {"mlm_logits": rng.integers(0, VOCABULARY, (batch, 3)), "nsp_logits": rng.integers(0, 2, batch)},
            {"mlm_logits": weights, "nsp_logits": np.ones(batch, "float32")},
        ),
    }

    def losses(make, x, y, sample_weight, initial):
        keras.utils.set_random_seed(0)
        model = make()
        if initial is not None:
            model.set_weights(initial)
        start = [keras.ops.convert_to_numpy(w) for w in model.weights]
        # global_clipnorm 1e-2: clipping is active on every step, so the global norm matters.
        model.compile(
            optimizer=create_optimizer(1e-3, train_steps=8, warmup_steps=1, global_clipnorm=1e-2),
            loss=model.default_loss(),
        )
        per_step = []
        record = keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda step, logs: per_step.append(float(logs["loss"]))
        )
        model.fit(
            x,
            y,
            sample_weight=sample_weight,
            batch_size=8,
            epochs=4,
            shuffle=False,
            verbose=0,
            callbacks=[record],
        )
        return per_step, start

    report = {"devices": [str(d) for d in jax.devices()]}
    for name, (make, tx, ty, weight) in tasks.items():
        keras.distribution.set_distribution(None)
        one, initial = losses(make, tx, ty, weight, None)
        distribution = keras.distribution.DataParallel(devices=jax.devices())
        keras.distribution.set_distribution(distribution)
        parallel, _ = losses(make, tx, ty, weight, initial)
        report["mesh_shape"] = list(distribution.device_mesh.shape)
        report["batch_layout_axes"] = list(distribution.get_data_layout((8, LENGTH)).axes)
        keras.distribution.set_distribution(None)
        report[name] = {"one_device": one, "data_parallel": parallel}
    print(json.dumps(report))


def error_or(run, ran="ran"):
    """`ran` (or what it returns) when `run()` raises nothing, else "ErrorType: message"."""
    try:
        value = run()
    except Exception as error:  # the report names what was raised
        return f"{type(error).__name__}: {error}"
    return ran if value is None else value


def edges(text_in_path):
    """What a demanding user meets: a mixed_float16 model's compiled predict, out-of-range
    token ids through fit/evaluate/predict, loading a .keras file with the in-graph
    tokenizer (saved on TensorFlow) here, and mixed precision through fit, save and load."""
    report = {}
    x = inputs()

    def float16_predict():
        backbone = kb.BertBackbone(**tiny_config(dtype="mixed_float16"))
        compiled = backbone.predict(x, verbose=0)["sequence_output"]  # jit on JAX
        eager = numpy_outputs(backbone(x))["sequence_output"]
        return {
            "finite": bool(np.isfinite(compiled).all()),
            "dtype": str(compiled.dtype),
            "max_abs_diff_vs_call": float(
                np.max(np.abs(compiled.astype("float32") - eager.astype("float32")))
            ),
        }

    report["float16_predict"] = error_or(float16_predict)
    classifier = kb.BertClassifier(kb.BertBackbone(**tiny_config()), num_classes=3)
    bad = dict(x, token_ids=x["token_ids"] + VOCABULARY)  # every id past the vocabulary
    y = np.zeros(BATCH, "int32")

    def outputs_of(run):
        def check():
            logits = run()["logits"]
            return f"ran, NaN outputs: {bool(np.isnan(logits).any())}"

        return check

    report["out_of_range"] = {
        "predict": error_or(outputs_of(lambda: classifier.predict(bad, verbose=0))),
        "predict_on_batch": error_or(outputs_of(lambda: classifier.predict_on_batch(bad))),
        "evaluate": error_or(lambda: classifier.evaluate(bad, y, verbose=0) and None),
        "fit": error_or(lambda: classifier.fit(bad, y, epochs=1, verbose=0) and None),
    }
    pretrainer = kb.BertPretrainer(kb.BertBackbone(**tiny_config()))
    past_the_end = dict(
        x, mask_positions=np.array([[1, 2, LENGTH]] * BATCH, "int32")
    )  # LENGTH: one past the last

    def logits_of(run):
        return lambda: f"ran, NaN outputs: {bool(np.isnan(run()['mlm_logits']).any())}"

    report["mask_positions_out_of_range"] = {
        "call": error_or(logits_of(lambda: numpy_outputs(pretrainer(past_the_end)))),
        "predict": error_or(logits_of(lambda: pretrainer.predict(past_the_end, verbose=0))),
    }
    report["text_in_load"] = error_or(lambda: keras.saving.load_model(text_in_path) and None, ran="loaded")

    def mixed_precision_round_trip(policy):
        # A classifier on a backbone built with a mixed policy, trained a step, saved, loaded.
        classifier = kb.BertClassifier(kb.BertBackbone(**tiny_config(dtype=policy)), num_classes=3)
        built = {
            "head_policy": classifier.dtype_policy.name,
            "optimizer": type(classifier.optimizer).__name__,
        }
        classifier.fit(x, y, epochs=1, verbose=0)
        path = os.path.join(os.path.dirname(text_in_path), f"{policy}.keras")
        classifier.save(path)
        loaded = keras.saving.load_model(path)
        os.remove(path)
        return {
            "built": built,
            "loaded": {
                "backbone_policy": loaded.backbone.dtype_policy.name,
                "encoder_policy": loaded.backbone.transformer_layers[0].dtype_policy.name,
                "sequence_output_dtype": keras.backend.standardize_dtype(
                    loaded.backbone(x)["sequence_output"].dtype
                ),
                "optimizer": type(loaded.optimizer).__name__,
                "iterations": int(keras.ops.convert_to_numpy(loaded.optimizer.iterations)),
            },
        }

    report["mixed_precision_round_trip"] = {
        policy: error_or(lambda policy=policy: mixed_precision_round_trip(policy))
        for policy in ("mixed_bfloat16", "mixed_float16")
    }
    print(json.dumps(report))


def main(argv):
    if argv[0] == "forward":
        forward(*argv[1:])
    elif argv[0] == "edges":
        edges(argv[1])
    elif argv[0] == "workout":
        # `workout WORKDIR [MODEL INPUTS OUT]`: with a model, its forward first (as `forward` gives
        # it), in the same process: one start of the backend and its imports for both.
        if len(argv) > 2:
            forward(*argv[2:])
        workout(argv[1])
    elif argv[0] == "data-parallel":
        data_parallel()
    else:
        raise SystemExit(f"unknown mode {argv[0]!r}: use forward, workout, edges or data-parallel")


if __name__ == "__main__":
    main(sys.argv[1:])
