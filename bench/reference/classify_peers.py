"""Raw-text classification by the CPU runtimes users pick for speed, on our Hugging Face export:
one peer per run, for the ours-vs-peers bench (issue 33). Runs in .venv-peers (`make peers-venv`:
torch 2.13.0 CPU, transformers, onnx, onnxscript, onnxruntime, openvino, nncf; no TensorFlow).

    .venv-peers/bin/python -m bench.reference.classify_peers --model FOLDER --sentences FILE \\
        --peer onnxruntime_fp32 [--threads 2] [--rounds 1] [--calibration TRAIN_SENTENCES]

FOLDER: `kbert export --formats huggingface` of a fine-tuned classifier (config.json naming
BertForSequenceClassification, model.safetensors, tokenizer.json). Prints one JSON line (below).

What every peer shares
- Tokenization: the folder's tokenizer.json in the `tokenizers` library (the Rust tokenizer
  transformers' BertTokenizer wraps; at the end the run checks that AutoTokenizer gives the same
  ids), truncation at --seq-len (128), timed with the model as ours is.
- Batch-32 throughput ("each side at its best length handling", as our TextPredictor does): all
  texts tokenized, sorted by wordpiece count (longest first, stable), batches of --batch-size
  each padded to its own longest row, outputs put back in input order. A warm-up over the
  first 256 texts, then --rounds timed passes over the whole file.
- Batch-1 latency: --latency-sentences texts in file order, one call each (tokenize + forward,
  no padding), after 10 untimed calls; p50, p90 and mean in ms.
- Threads: --threads (2) intra-op threads, one inter-op thread, in every runtime (below). Time
  the peers on an idle machine: on shared cores PyTorch's OpenMP threads spin at each barrier
  while the other is descheduled, which multiplies its batch-1 latency; this script leaves
  OpenMP's defaults as users get them.
- Memory: `peak_rss_mib` is the process's peak resident set (ru_maxrss) after loading and every
  timed run, before the correctness check (which loads the PyTorch fp32 model too);
  `rss_before_load_mib` is the process after its imports: numpy, tokenizers and the peer's
  runtime (onnxruntime, openvino; torch and transformers for the PyTorch peers only, as a
  serving process of ONNX Runtime or OpenVINO would hold neither).
- Preparation (exporting, optimizing, quantizing, converting) happens once per model folder,
  in a child process of this script (`--prepare`), so the timed process holds only what a
  user's serving process would; each artifact is a folder written beside it and renamed into
  place (a stopped run leaves none half-written) under --work/<fingerprint>/, where the
  fingerprint covers the folder's config.json and model.safetensors, the package versions and
  RECIPE. Its `manifest.json` keeps the seconds it took; `prepare.made_now` says whether this
  run made it. `load_seconds`: this process from loading the tokenizer to a model ready to run
  (session creation, OpenVINO's compile), before the warm-up.
- Correctness, after the timings: PyTorch fp32 (transformers' BertForSequenceClassification
  from the folder, eager attention) on the first --check-sentences texts as one batch padded to
  its longest; `check` reports the largest |logit difference| from the peer's logits of the
  last round and how many top labels agree. fp32 peers are expected within 1e-3
  (`within_1e-3`); int8 ones report agreement only.

The peers
- pytorch_fp32: BertForSequenceClassification.from_pretrained(FOLDER) (transformers' default
  attention, SDPA), eval, `torch.inference_mode()`, torch.set_num_threads(threads),
  set_num_interop_threads(1). No preparation.
- pytorch_int8: the same model through `torch.ao.quantization.quantize_dynamic(model,
  {nn.Linear}, dtype=torch.qint8)` (dynamic int8: weights int8 per tensor, activations
  quantized per call; the quantized engine is torch's default for x86, named in `settings`),
  done at load time (counted in load_seconds).
- onnxruntime_fp32: `torch.onnx.export` of BertForSequenceClassification with eager attention,
  the TorchScript exporter (dynamo=False), opset 17, inputs input_ids / attention_mask /
  token_type_ids (int64) and output logits, batch and sequence axes dynamic; then
  `onnxruntime.transformers.optimizer.optimize_model(model_type="bert", num_heads, hidden_size)`
  (its BERT fusions; `prepare.steps.ort_fp32.fusions` is `get_fused_operator_statistics()`,
  the non-zero entries: on MiniLM-L6 EmbedLayerNormalization 1, Attention 6, BiasGelu 6,
  SkipLayerNormalization 12). Why that exporter: on a bert_tiny export, torch's default dynamo
  exporter (with SDPA or eager attention) and the TorchScript exporter with SDPA left attention
  and the embedding's LayerNorm unfused (SkipLayerNormalization 4, BiasGelu 2, no Attention, no
  EmbedLayerNormalization); the TorchScript exporter with eager attention gave all of them
  (EmbedLayerNormalization 1, Attention 2, SkipLayerNormalization 4, BiasGelu 2). Session:
  CPUExecutionProvider, intra_op_num_threads=threads, inter_op_num_threads=1, sequential
  execution, graph optimization level ORT_ENABLE_ALL.
- onnxruntime_int8: `onnxruntime.quantization.quantize_dynamic` of the optimized model with
  weight_type=QInt8, per tensor, no reduce_range (as ORT's BERT quantization example does;
  activations are quantized to uint8 at run time, so the products run u8s8), and
  DefaultTensorType=FLOAT (without it quantize_dynamic refuses the fused graph: ONNX shape
  inference types no output of the contrib ops). MatMul -> MatMulInteger, the fused Attention ->
  QAttention (`prepare.steps.ort_int8.quantized_ops` counts them: on MiniLM-L6 MatMulInteger 20,
  QAttention 6). The same session options.
- onnxruntime_int8_per_channel: the same with per_channel=True (one scale per output channel of
  each weight), which keeps ORT fp32's labels more often than per tensor on MiniLM;
  reduce_range=True (ORT's advice against u8s8 saturation on CPUs without VNNI) is not used: it
  kept fewer per tensor and no more per channel.
- openvino_fp32: `openvino.convert_model` of the PyTorch model (transformers' default SDPA
  attention, which becomes OpenVINO's ScaledDotProductAttention op), with an example batch
  and every input dimension dynamic, saved as IR without fp16 compression; compiled for "CPU"
  with INFERENCE_NUM_THREADS=threads, NUM_STREAMS=1, PERFORMANCE_HINT=LATENCY (one stream,
  synchronous calls, as the other peers run) and INFERENCE_PRECISION_HINT=f32 (on CPUs with
  AVX-512 BF16 or AMX the CPU plugin would otherwise run bf16).
- openvino_int8: `nncf.quantize` of the fp32 IR (post-training static quantization, the
  recipe OpenVINO documents for BERT on CPU: model_type=TRANSFORMER, int8 weights and
  activations), calibrated on --calibration's sentences (the training part of the split: 300
  MR training sentences in the bench, never held-out ones), one unpadded sentence per sample;
  `prepare.steps.openvino_int8-*.quantized_ops` counts the FakeQuantize nodes NNCF inserted
  beside the model's MatMuls (on MiniLM-L6: 38 and 38; attention's two products stay inside
  ScaledDotProductAttention, in float). Compiled as openvino_fp32 (f32 for what stays float).

The JSON line: peer, model, sentences, batch_size, seq_len, threads, rounds; seconds and
sentences_per_second (one per round); latency_batch1_ms {sentences, p50, p90, mean};
load_seconds, warm_up_seconds, rss_before_load_mib, peak_rss_mib; prepare {made_now, seconds,
steps {artifact: its manifest: seconds, versions, and fusions, quantization and quantized_ops
where they apply}}; labels (argmax,
input order, every sentence); check {...}; settings (the runtime's options); versions; cpu
(model and SIMD flags).
"""

import argparse
import functools
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

from bench.common import WORK, machine_info  # noqa: E402

PEERS = (
    "pytorch_fp32",
    "pytorch_int8",
    "onnxruntime_fp32",
    "onnxruntime_int8",
    "onnxruntime_int8_per_channel",
    "openvino_fp32",
    "openvino_int8",
)
# Changing how an artifact is made changes this, so stale artifacts are not reused.
RECIPE = (
    "onnx-torchscript-eager-opset17/ort-bert-fusions/ort-dynamic-qint8/ov-from-torch-sdpa/"
    "nncf-quantize-transformer:1"
)
ONNX_OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
WARM_UP_TEXTS = 256
LATENCY_WARM_UP = 10
# The artifacts each peer needs, in the order they are made (each from the one before).
ARTIFACTS = {
    "onnxruntime_fp32": ("onnx", "ort_fp32"),
    "onnxruntime_int8": ("onnx", "ort_fp32", "ort_int8"),
    "onnxruntime_int8_per_channel": ("onnx", "ort_fp32", "ort_int8_per_channel"),
    "openvino_fp32": ("openvino_fp32",),
    "openvino_int8": ("openvino_fp32", "openvino_int8"),
}
CALIBRATION_MISSING = (
    "--calibration is missing: openvino_int8 calibrates nncf.quantize on training sentences (a text "
    "file, one per line; never the held-out ones). Pass --calibration FILE."
)
VERSIONED = (
    "torch",
    "transformers",
    "tokenizers",
    "onnx",
    "onnxscript",
    "onnxruntime",
    "openvino",
    "nncf",
    "numpy",
)


def _versions():
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in VERSIONED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def _rss_mib():
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def _peak_rss_mib():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def _config(folder):
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        return json.load(f)


def _sha256(path, extra=b""):
    digest = hashlib.sha256(extra)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fingerprint(folder):
    digest = hashlib.sha256(RECIPE.encode())
    digest.update(json.dumps(_versions(), sort_keys=True).encode())
    for name in ("config.json", "model.safetensors"):
        digest.update(_sha256(os.path.join(folder, name)).encode())
    return digest.hexdigest()[:16]


# --- artifacts: made once per model folder, each a folder renamed into place ---------------------


def _artifact_folder(work, name, calibration):
    if name == "openvino_int8":  # calibrated: one per calibration file
        return os.path.join(work, f"{name}-{_sha256(calibration)[:12]}")
    return os.path.join(work, name)


def _make_artifact(name, folder, work, threads, calibration):
    """Makes artifact `name` (its inputs already made) in a folder beside its place, then renames it
    there; returns its manifest."""
    final = _artifact_folder(work, name, calibration)
    building = f"{final}.tmp-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    os.makedirs(building)
    started = time.perf_counter()
    try:
        details = MAKERS[name](folder, work, building, threads, calibration)
        manifest = {
            "artifact": name,
            "seconds": round(time.perf_counter() - started, 2),
            **details,
            "versions": _versions(),
            "recipe": RECIPE,
        }
        with open(os.path.join(building, "manifest.json"), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2)
        try:
            os.rename(building, final)
        except OSError:  # another run made it meanwhile: keep theirs
            if not os.path.isdir(final):
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return manifest


def _torch_model(folder, attention):
    import torch
    from transformers import BertForSequenceClassification

    return BertForSequenceClassification.from_pretrained(
        folder, attn_implementation=attention, dtype=torch.float32
    ).eval()


def _example_batch(folder):
    """A two-row int64 batch from the folder's tokenizer: what the exporters trace."""
    tokenizer = _tokenizer(folder, 128)
    return _pad(
        [e.ids for e in tokenizer.encode_batch(["a dull film", "an unexpectedly moving and funny film"])]
    )


def _make_onnx(folder, work, out, threads, calibration):
    import torch

    model = _torch_model(folder, "eager")
    batch = _example_batch(folder)
    dynamic = {name: {0: "batch", 1: "sequence"} for name in INPUTS}
    dynamic["logits"] = {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(
            model,
            tuple(torch.from_numpy(batch[n]) for n in INPUTS),
            os.path.join(out, "model.onnx"),
            dynamo=False,
            input_names=list(INPUTS),
            output_names=["logits"],
            dynamic_axes=dynamic,
            opset_version=ONNX_OPSET,
        )
    return {"exporter": "torch.onnx.export(dynamo=False)", "attention": "eager", "opset": ONNX_OPSET}


def _make_ort_fp32(folder, work, out, threads, calibration):
    from onnxruntime.transformers.optimizer import optimize_model

    config = _config(folder)
    optimized = optimize_model(
        os.path.join(work, "onnx", "model.onnx"),
        model_type="bert",
        num_heads=config["num_attention_heads"],
        hidden_size=config["hidden_size"],
    )
    optimized.save_model_to_file(os.path.join(out, "model.onnx"))
    fusions = {op: n for op, n in optimized.get_fused_operator_statistics().items() if n}
    return {
        "optimizer": "onnxruntime.transformers.optimizer.optimize_model(model_type='bert')",
        "fusions": fusions,
    }


def _make_ort_int8(folder, work, out, threads, calibration, per_channel=False):
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # ONNX's shape inference gives no type to the outputs of the fused contrib ops (Attention,
    # SkipLayerNormalization, ...), and quantize_dynamic then refuses the MatMul after Attention
    # ("Unable to find data type for weight_name=...") unless told they are float, as its error says.
    quantize_dynamic(
        os.path.join(work, "ort_fp32", "model.onnx"),
        os.path.join(out, "model.onnx"),
        weight_type=QuantType.QInt8,
        per_channel=per_channel,
        reduce_range=False,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    counted = ("MatMulInteger", "QAttention", "DynamicQuantizeLinear")
    return {
        "quantized_ops": _onnx_op_counts(os.path.join(out, "model.onnx"), counted),
        "quantization": {
            "function": "onnxruntime.quantization.quantize_dynamic",
            "weight_type": "QInt8",
            "per_channel": per_channel,
            "reduce_range": False,
            "extra_options": {"DefaultTensorType": "FLOAT"},
        },
    }


def _onnx_op_counts(path, op_types):
    import onnx

    nodes = [n.op_type for n in onnx.load(path).graph.node]
    return {op: nodes.count(op) for op in op_types}


def _make_openvino_fp32(folder, work, out, threads, calibration):
    import openvino as ov
    import torch

    torch.set_num_threads(threads)
    model = _torch_model(folder, "sdpa")
    batch = _example_batch(folder)
    example = {n: torch.from_numpy(batch[n]) for n in INPUTS}
    dynamic = [(n, ov.PartialShape([-1, -1]), ov.Type.i64) for n in INPUTS]
    with torch.inference_mode():
        converted = ov.convert_model(model, example_input=example, input=dynamic)
    ov.save_model(converted, os.path.join(out, "model.xml"), compress_to_fp16=False)
    return {
        "converter": "openvino.convert_model(torch model, example_input, dynamic [-1, -1] inputs)",
        "attention": "sdpa",
    }


def _make_openvino_int8(folder, work, out, threads, calibration):
    import nncf
    import openvino as ov

    texts = _read_texts(calibration)
    tokenizer = _tokenizer(folder, 128)
    samples = [_pad([e.ids]) for e in tokenizer.encode_batch(texts)]
    core = ov.Core()
    core.set_property("CPU", {"INFERENCE_NUM_THREADS": threads})
    model = core.read_model(os.path.join(_artifact_folder(work, "openvino_fp32", calibration), "model.xml"))
    quantized = nncf.quantize(
        model, nncf.Dataset(samples), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(samples)
    )
    ov.save_model(quantized, os.path.join(out, "model.xml"), compress_to_fp16=False)
    kinds = [op.get_type_name() for op in quantized.get_ops()]
    return {
        "quantized_ops": {"FakeQuantize": kinds.count("FakeQuantize"), "MatMul": kinds.count("MatMul")},
        "quantization": {
            "function": "nncf.quantize",
            "model_type": "TRANSFORMER",
            "preset": "default (MIXED)",
            "calibration_sentences": len(samples),
            "calibration_sha256": _sha256(calibration),
        },
    }


MAKERS = {
    "onnx": _make_onnx,
    "ort_fp32": _make_ort_fp32,
    "ort_int8": _make_ort_int8,
    "ort_int8_per_channel": functools.partial(_make_ort_int8, per_channel=True),
    "openvino_fp32": _make_openvino_fp32,
    "openvino_int8": _make_openvino_int8,
}


def prepare(peer, folder, work, threads, calibration):
    """Makes the artifacts `peer` needs that are not there yet; returns {made_now, seconds, steps}."""
    steps, made_now = {}, False
    for name in ARTIFACTS.get(peer, ()):
        manifest_path = os.path.join(_artifact_folder(work, name, calibration), "manifest.json")
        if os.path.exists(manifest_path):
            with open(manifest_path, encoding="utf-8") as f:
                steps[name] = json.load(f)
        else:
            steps[name] = _make_artifact(name, folder, work, threads, calibration)
            made_now = True
    return {
        "made_now": made_now,
        "seconds": round(sum(s["seconds"] for s in steps.values()), 2),
        "steps": steps,
    }


# --- tokenization and batches -----------------------------------------------------------------------


def _tokenizer(folder, seq_len):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tokenizer.enable_truncation(max_length=seq_len)
    tokenizer.no_padding()
    return tokenizer


def _pad(rows, pad_id=0):
    """Token id lists -> {input_ids, attention_mask, token_type_ids}: int64 [B, longest row]."""
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad_id, np.int64)
    mask = np.zeros((len(rows), width), np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def classify(forward, tokenizer, texts, batch_size, pad_id):
    """Logits [N, labels] in input order: tokenized, sorted longest first, batches padded to their
    longest row (as TextPredictor does)."""
    rows = [e.ids for e in tokenizer.encode_batch(texts)]
    lengths = np.array([len(r) for r in rows])
    order = np.argsort(-lengths, kind="stable")
    logits = None
    for start in range(0, len(order), batch_size):
        picked = order[start : start + batch_size]
        out = forward(_pad([rows[i] for i in picked], pad_id))
        if logits is None:
            logits = np.empty((len(texts), out.shape[1]), np.float32)
        logits[picked] = out
    return logits


# --- the peers at run time --------------------------------------------------------------------------


def ort_session(peer, work, threads, profile_prefix=None):
    """An ONNX Runtime peer's session as every bench runs it; with `profile_prefix`, ORT's own
    profiler is on (`session.end_profiling()` writes its per-node JSON trace there)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    artifact = ARTIFACTS[peer][-1]
    return ort.InferenceSession(
        os.path.join(work, artifact, "model.onnx"), options, providers=["CPUExecutionProvider"]
    )


def load(peer, folder, work, threads, calibration):
    """(forward({input: int64 [B, T]}) -> float32 logits [B, labels], settings)."""
    if peer.startswith("pytorch"):
        import torch

        model = _torch_model(folder, "sdpa")
        settings = {"attention": model.config._attn_implementation, "torch_threads": torch.get_num_threads()}
        if peer == "pytorch_int8":
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
            settings["quantized_engine"] = torch.backends.quantized.engine

        def forward(batch):
            with torch.inference_mode():
                return model(**{n: torch.from_numpy(v) for n, v in batch.items()}).logits.numpy()

        return forward, settings
    if peer.startswith("onnxruntime"):
        session = ort_session(peer, work, threads)
        settings = {
            "providers": session.get_providers(),
            "intra_op_num_threads": threads,
            "inter_op_num_threads": 1,
            "execution_mode": "ORT_SEQUENTIAL",
            "graph_optimization_level": "ORT_ENABLE_ALL",
        }
        return (lambda batch: session.run(["logits"], batch)[0]), settings
    import openvino as ov

    config = {
        "INFERENCE_NUM_THREADS": threads,
        "NUM_STREAMS": 1,
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": "f32",
    }
    core = ov.Core()
    compiled = core.compile_model(
        os.path.join(_artifact_folder(work, peer, calibration), "model.xml"), "CPU", config
    )
    request = compiled.create_infer_request()
    settings = {
        "device": "CPU",
        **config,
        "inference_precision_in_force": str(compiled.get_property("INFERENCE_PRECISION_HINT")),
    }

    def forward(batch):
        request.infer(batch)
        return request.get_output_tensor(0).data.copy()

    return forward, settings


def check(peer_logits, folder, texts, seq_len):
    """The peer's logits of texts[:n] against PyTorch fp32's (eager attention, one batch)."""
    import torch
    from transformers import AutoTokenizer

    auto = AutoTokenizer.from_pretrained(folder)
    batch = auto(texts, padding=True, truncation=True, max_length=seq_len, return_tensors="np")
    ours = _tokenizer(folder, seq_len).encode_batch(texts)
    same_ids = all(
        list(row[mask.astype(bool)]) == e.ids
        for row, mask, e in zip(batch["input_ids"], batch["attention_mask"], ours)
    )
    model = _torch_model(folder, "eager")
    with torch.inference_mode():
        reference = model(**{n: torch.from_numpy(batch[n].astype(np.int64)) for n in INPUTS}).logits.numpy()
    difference = float(np.abs(peer_logits - reference).max())
    agree = int((peer_logits.argmax(-1) == reference.argmax(-1)).sum())
    return {
        "sentences": len(texts),
        "reference": "transformers BertForSequenceClassification fp32 (eager attention)",
        "max_abs_logit_diff": difference,
        "top_labels_agree": agree,
        "within_1e-3": difference <= 1e-3,
        "tokenizer_ids_equal_autotokenizer": same_ids,
    }


def _read_texts(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def _latency(forward, tokenizer, sample, pad_id):
    """Batch-1 latency over `sample`, one text a call (tokenization included), in ms."""
    for text in sample[:LATENCY_WARM_UP]:
        forward(_pad([tokenizer.encode(text).ids], pad_id))
    latencies = []
    for text in sample:
        started = time.perf_counter()
        forward(_pad([tokenizer.encode(text).ids], pad_id))
        latencies.append((time.perf_counter() - started) * 1000)
    return {
        "sentences": len(latencies),
        "p50": round(float(np.percentile(latencies, 50)), 3),
        "p90": round(float(np.percentile(latencies, 90)), 3),
        "mean": round(float(np.mean(latencies)), 3),
    }


def _serve(args, forward, tokenizer, texts, pad_id, ready):
    """--serve: the warm peer answering stdin, one JSON line per command (see --serve's help)."""
    print(json.dumps(ready), flush=True)
    logits = None
    for command in sys.stdin:
        command = command.strip()
        if command == "pass":
            started = time.perf_counter()
            logits = classify(forward, tokenizer, texts, args.batch_size, pad_id)
            print(
                json.dumps({"seconds": time.perf_counter() - started, "labels": logits.argmax(-1).tolist()}),
                flush=True,
            )
        elif command == "latency":
            latency = _latency(forward, tokenizer, texts[: args.latency_sentences], pad_id)
            print(json.dumps({"latency_batch1_ms": latency}), flush=True)
        elif command == "done":
            peak = _peak_rss_mib()
            checked = (
                None
                if logits is None
                else check(
                    logits[: args.check_sentences], args.model, texts[: args.check_sentences], args.seq_len
                )
            )
            print(json.dumps({"peak_rss_mib": peak, "check": checked}), flush=True)
            return 0
        else:
            raise SystemExit(f"--serve: unknown command {command!r}: pass, latency or done.")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--model", required=True, help="A `kbert export --formats huggingface` classifier folder."
    )
    parser.add_argument(
        "--sentences", required=True, help="A text file, one sentence per line (blank lines skipped)."
    )
    parser.add_argument("--peer", required=True, choices=PEERS)
    parser.add_argument(
        "--threads", type=int, default=2, help="Intra-op threads of every runtime (inter-op: 1)."
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="Timed passes over the whole file, after the warm-up."
    )
    parser.add_argument(
        "--batch-size", type=int, default=32, help="Texts per batch of the throughput passes."
    )
    parser.add_argument(
        "--seq-len", type=int, default=128, help="Truncation, in wordpieces with [CLS] and [SEP]."
    )
    parser.add_argument(
        "--latency-sentences", type=int, default=200, help="Texts timed one by one (file order)."
    )
    parser.add_argument(
        "--check-sentences",
        type=int,
        default=32,
        help="Texts whose logits are compared with PyTorch fp32's at the end.",
    )
    parser.add_argument(
        "--calibration", help="Training sentences, one per line, for openvino_int8's nncf.quantize."
    )
    parser.add_argument(
        "--work",
        default=os.path.join(WORK, "peers"),
        help="Where the prepared artifacts are kept, per model fingerprint (default data/bench/peers).",
    )
    parser.add_argument(
        "--prepare", action="store_true", help="Only make the peer's artifacts (the run does it itself)."
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="Stay warm and answer stdin instead of --rounds (bench/perf/cpu_peers.py's interleaved "
        "rounds): after the warm-up one JSON line {ready, load_seconds, ...}; then per line "
        "'pass' -> {seconds, labels}, 'latency' -> {latency_batch1_ms}, 'done' -> {peak_rss_mib, "
        "check} and exit.",
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.threads < 1 or args.rounds < 1 or args.batch_size < 1:
        raise SystemExit(
            f"--threads, --rounds and --batch-size must be positive. Received: {args.threads}, "
            f"{args.rounds}, {args.batch_size}."
        )
    config = _config(args.model)
    if config.get("architectures") != ["BertForSequenceClassification"]:
        raise SystemExit(
            f"{args.model}: config.json names {config.get('architectures')}, not "
            "BertForSequenceClassification: export a fine-tuned classifier (kbert export --formats "
            "huggingface)."
        )
    if args.calibration:
        args.calibration = os.path.abspath(args.calibration)
    elif args.peer == "openvino_int8":
        raise SystemExit(CALIBRATION_MISSING)
    work = os.path.join(args.work, _fingerprint(args.model))
    os.makedirs(work, exist_ok=True)

    if args.prepare or args.peer.startswith("pytorch"):
        import torch

        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(1)
    if args.prepare:
        print(json.dumps(prepare(args.peer, args.model, work, args.threads, args.calibration)))
        return 0
    if any(
        not os.path.exists(os.path.join(_artifact_folder(work, a, args.calibration), "manifest.json"))
        for a in ARTIFACTS.get(args.peer, ())
    ):
        # In a child: exporting and converting hold the PyTorch model and the exporters' memory.
        subprocess.run(
            [sys.executable, "-m", "bench.reference.classify_peers", *argv, "--prepare"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        made_now = True
    else:
        made_now = False
    prepared = prepare(args.peer, args.model, work, args.threads, args.calibration)
    prepared["made_now"] = made_now
    # The peer's runtime is imported before the baseline; torch and transformers only by the PyTorch
    # peers (the others' process imports them for the check, after the timings).
    if args.peer.startswith("openvino"):
        import openvino  # noqa: F401
    elif args.peer.startswith("onnxruntime"):
        import onnxruntime  # noqa: F401
    else:
        import transformers  # noqa: F401

    texts = _read_texts(args.sentences)
    pad_id = config.get("pad_token_id") or 0
    rss_before = _rss_mib()
    started = time.perf_counter()
    tokenizer = _tokenizer(args.model, args.seq_len)
    forward, settings = load(args.peer, args.model, work, args.threads, args.calibration)
    load_seconds = time.perf_counter() - started

    started = time.perf_counter()
    classify(forward, tokenizer, texts[:WARM_UP_TEXTS], args.batch_size, pad_id)
    warm_up_seconds = time.perf_counter() - started
    if args.serve:
        return _serve(
            args,
            forward,
            tokenizer,
            texts,
            pad_id,
            {
                "ready": True,
                "load_seconds": round(load_seconds, 3),
                "warm_up_seconds": round(warm_up_seconds, 3),
                "rss_before_load_mib": rss_before,
                "prepare": prepared,
                "settings": settings,
                "versions": _versions(),
            },
        )
    seconds = []
    for round_ in range(args.rounds):
        started = time.perf_counter()
        logits = classify(forward, tokenizer, texts, args.batch_size, pad_id)
        seconds.append(time.perf_counter() - started)
        print(
            f"{args.peer} round {round_}: {len(texts) / seconds[-1]:.1f} sentences/s",
            file=sys.stderr,
            flush=True,
        )
    latency = _latency(forward, tokenizer, texts[: args.latency_sentences], pad_id)
    peak = _peak_rss_mib()

    checked = check(logits[: args.check_sentences], args.model, texts[: args.check_sentences], args.seq_len)
    cpu = machine_info()
    print(
        json.dumps(
            {
                "peer": args.peer,
                "model": os.path.abspath(args.model),
                "sentences": len(texts),
                "batch_size": args.batch_size,
                "seq_len": args.seq_len,
                "threads": args.threads,
                "rounds": args.rounds,
                "seconds": [round(s, 4) for s in seconds],
                "sentences_per_second": [round(len(texts) / s, 2) for s in seconds],
                "latency_batch1_ms": latency,
                "load_seconds": round(load_seconds, 3),
                "warm_up_seconds": round(warm_up_seconds, 3),
                "rss_before_load_mib": rss_before,
                "peak_rss_mib": peak,
                "prepare": prepared,
                "labels": logits.argmax(-1).tolist(),
                "check": checked,
                "settings": settings,
                "versions": _versions(),
                "cpu": {"model": cpu["cpu_model"], "simd": cpu["cpu_simd"]},
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
