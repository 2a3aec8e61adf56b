"""The peer a GPU user would pick, on the same device as bench/gpu/gpu_bench.py: PyTorch with
transformers' BERT (SDPA attention, bf16 autocast, torch.compile), on the step gpu_bench's
`pretrain` phase times and on the inference its `inference` phase times.

- pretrain: BERT-base MLM + NSP at length 128 with 20 masked positions per sequence, token ids
  drawn at random, BERT's hidden dropout (--dropout, 0.1) and --attention-dropout (default 0, as
  gpu_bench's fused-attention runs), exact GELU, torch.optim.AdamW (fused on CUDA), bf16 autocast
  over float32 weights (what Keras' mixed_bfloat16 does). The masked-LM head runs on the masked
  positions only (`--mlm-head masked`: the sequence output gathered at them, then
  BertForPreTraining's own `cls` head, as NVIDIA's DeepLearningExamples and our BertPretrainer
  do); `--mlm-head full` runs BertForPreTraining's forward, which predicts at every position.
  Step time (median of per-step times, synchronized) and, as gpu_bench's "without callbacks",
  the mean over the timed steps with one synchronization at the end; MFU with gpu_bench's own
  FLOP count (`train_flops`: matmul FLOPs of the layer shapes at the masked positions, 3x the
  forward) against the datasheet's dense bf16 peak.
- inference: transformers' BertModel with random weights in two shapes, BERT-base and
  all-MiniLM-L6-v2's (6 layers, H 384, 12 heads), eval mode, bf16 autocast, compiled; token ids
  as numpy arrays on the host each call ("raw ids in": the copy to the device is timed), the
  output synchronized, not copied back. Batch 1: latency percentiles; batch 256: sequences/s.

Runs with the GPU machine's python3 (its image has torch and transformers); --tiny runs toy
sizes on the CPU (tests/bench/test_torch_peer.py, in .venv-torch).

    python -m bench.gpu.torch_peer --output OUT.json [--phases pretrain inference] [--tiny]
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from bench.gpu.gpu_bench import PREDICTIONS, SEQ_LEN, datasheet_peak, run_phases, train_flops

STARTED = time.perf_counter()
BERT_BASE = {
    "vocabulary_size": 30522,
    "num_layers": 12,
    "num_heads": 12,
    "hidden_dim": 768,
    "intermediate_dim": 3072,
}
MINILM = {
    "vocabulary_size": 30522,
    "num_layers": 6,
    "num_heads": 12,
    "hidden_dim": 384,
    "intermediate_dim": 1536,
}
TINY = {"vocabulary_size": 512, "num_layers": 2, "num_heads": 2, "hidden_dim": 32, "intermediate_dim": 64}
INFERENCE_MODELS = {"bert_base": BERT_BASE, "minilm": MINILM}


def elapsed():
    return time.perf_counter() - STARTED


def bert_config(shape, dropout, attention_dropout):
    """transformers' BertConfig of one of our shape dicts (exact GELU, BERT's epsilon, SDPA)."""
    from transformers import BertConfig

    return BertConfig(
        vocab_size=shape["vocabulary_size"],
        hidden_size=shape["hidden_dim"],
        num_hidden_layers=shape["num_layers"],
        num_attention_heads=shape["num_heads"],
        intermediate_size=shape["intermediate_dim"],
        hidden_act="gelu",
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=attention_dropout,
        max_position_embeddings=512,
        type_vocab_size=2,
        layer_norm_eps=1e-12,
        attn_implementation="sdpa",
    )


def synchronize(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def pretraining_batch(shape, batch, seq_len, predictions, rng, device):
    """One random batch laid out as gpu_bench's pretrain phase lays it out: two segments, no
    padding, `predictions` sorted masked positions in [1, seq_len - 1), random labels."""
    import torch

    low = 1000 if shape["vocabulary_size"] > 2000 else 1  # gpu_bench draws ids from 1000 up
    token_ids = rng.integers(low, shape["vocabulary_size"], (batch, seq_len))
    segment_ids = np.repeat(np.r_[np.zeros(seq_len // 2), np.ones(seq_len - seq_len // 2)][None], batch, 0)
    positions = np.sort(rng.integers(1, seq_len - 1, (batch, predictions)), axis=1)
    mlm_labels = rng.integers(low, shape["vocabulary_size"], (batch, predictions))
    nsp_labels = rng.integers(0, 2, batch)

    def tensor(a):
        return torch.as_tensor(a, dtype=torch.long, device=device)

    return {
        "input_ids": tensor(token_ids),
        "token_type_ids": tensor(segment_ids),
        "attention_mask": torch.ones((batch, seq_len), dtype=torch.long, device=device),
        "positions": tensor(positions),
        "mlm_labels": tensor(mlm_labels),
        "nsp_labels": tensor(nsp_labels),
    }


def pretraining_step(model, optimizer, mlm_head, device, args):
    """A function of one batch running forward, loss, backward and the AdamW update under bf16
    autocast; returns the loss tensor. torch.compile takes the forward and loss (AOTAutograd
    compiles their backward with them); backward() and the fused AdamW step run as called."""
    import torch
    import torch.nn.functional as F

    def loss_of(batch):
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            if mlm_head == "masked":
                outputs = model.bert(
                    input_ids=batch["input_ids"],
                    token_type_ids=batch["token_type_ids"],
                    attention_mask=batch["attention_mask"],
                )
                sequence = outputs.last_hidden_state  # [B, T, H]
                index = batch["positions"].unsqueeze(-1).expand(-1, -1, sequence.shape[-1])
                mlm_logits = model.cls.predictions(torch.gather(sequence, 1, index))  # [B, P, V]
                nsp_logits = model.cls.seq_relationship(outputs.pooler_output)  # [B, 2]
            else:
                outputs = model(
                    input_ids=batch["input_ids"],
                    token_type_ids=batch["token_type_ids"],
                    attention_mask=batch["attention_mask"],
                )
                mlm_logits = torch.gather(
                    outputs.prediction_logits,
                    1,
                    batch["positions"].unsqueeze(-1).expand(-1, -1, outputs.prediction_logits.shape[-1]),
                )
                nsp_logits = outputs.seq_relationship_logits
        mlm = F.cross_entropy(mlm_logits.float().flatten(0, 1), batch["mlm_labels"].flatten())
        nsp = F.cross_entropy(nsp_logits.float(), batch["nsp_labels"])
        return mlm + nsp

    compiled_loss = maybe_compile(loss_of, args)

    def step(batch):
        optimizer.zero_grad(set_to_none=True)
        loss = compiled_loss(batch)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def maybe_compile(module_or_function, args):
    import torch

    if not args.compile:
        return module_or_function
    return torch.compile(module_or_function, mode=args.compile_mode)


def pretrain(args, report, save, device):
    import torch
    from transformers import BertForPreTraining

    shape = TINY if args.tiny else BERT_BASE
    seq_len, predictions = (16, 4) if args.tiny else (SEQ_LEN, PREDICTIONS)
    config = {**shape}
    results = report["pretrain"] = {
        "model": "transformers BertForPreTraining, random init",
        "shape": shape,
        "seq_len": seq_len,
        "predictions": predictions,
        "dropout": args.dropout,
        "attention_dropout": args.attention_dropout,
        "mlm_head": args.mlm_head,
        "autocast": "bfloat16",
        "compiled": args.compile,
        "compile_mode": args.compile_mode,
        "optimizer": "torch.optim.AdamW" + (" (fused)" if device.type == "cuda" else ""),
        "data": "token ids drawn at random",
        "runs": [],
    }
    for batch in args.pretrain_batches:
        if elapsed() > args.deadline_s - args.phase_reserve_s:
            results["runs"].append(
                {"batch": batch, "skipped": f"deadline: {elapsed():.0f} s of {args.deadline_s} s"}
            )
            save()
            continue
        torch.manual_seed(0)
        model = (
            BertForPreTraining(bert_config(shape, args.dropout, args.attention_dropout)).to(device).train()
        )
        optimizer = torch.optim.AdamW(
            model.parameters(),
            lr=1e-4,
            weight_decay=0.01,
            **({"fused": True} if device.type == "cuda" else {}),
        )
        step = pretraining_step(model, optimizer, args.mlm_head, device, args)
        rng = np.random.default_rng(0)
        batches = [pretraining_batch(shape, batch, seq_len, predictions, rng, device) for _ in range(4)]
        start = time.perf_counter()
        for i in range(args.warmup_steps):
            loss = step(batches[i % len(batches)])
        synchronize(device)
        warmup_s = time.perf_counter() - start
        times = []
        for i in range(args.pretrain_steps):
            begin = time.perf_counter()
            loss = step(batches[i % len(batches)])
            synchronize(device)
            times.append(time.perf_counter() - begin)
        start = time.perf_counter()
        for i in range(args.pretrain_steps):
            loss = step(batches[i % len(batches)])
        synchronize(device)
        queued_s = (time.perf_counter() - start) / args.pretrain_steps
        step_s = float(np.median(times))
        flops = train_flops(config, batch, seq_len, predictions=predictions)
        peak = report.get("datasheet_bf16_tflops")
        run = {
            "batch": batch,
            "steps_timed": len(times),
            "warmup_steps": args.warmup_steps,
            "warmup_s_with_compile": warmup_s,
            "step_s_median": step_s,
            "step_s_p10_p90": [float(np.percentile(times, 10)), float(np.percentile(times, 90))],
            "step_s_queued": queued_s,
            "steps_per_s_queued": 1.0 / queued_s,
            "tokens_per_s": batch * seq_len / queued_s,
            "train_flops_per_step": flops,
            "achieved_tflops_queued": flops / queued_s / 1e12,
            "final_loss": float(loss),
        }
        if peak:
            run["mfu_datasheet"] = flops / step_s / 1e12 / peak
            run["mfu_datasheet_queued"] = flops / queued_s / 1e12 / peak
        results["runs"].append(run)
        print(
            f"torch pretrain batch {batch}: {step_s * 1e3:.1f} ms/step synchronized, {queued_s * 1e3:.1f} "
            f"ms/step queued, MFU {run.get('mfu_datasheet_queued', float('nan')):.1%} of the datasheet",
            flush=True,
        )
        save()
        del model, optimizer, step
        if device.type == "cuda":
            torch.cuda.empty_cache()


def time_calls(call, ids_of, repeats, device):
    """Seconds of each of `repeats` synchronized calls (after two untimed ones)."""
    for _ in range(2):
        call(ids_of())
    synchronize(device)
    times = []
    for _ in range(repeats):
        ids = ids_of()
        begin = time.perf_counter()
        call(ids)
        synchronize(device)
        times.append(time.perf_counter() - begin)
    return times


def autocast_call(forward, device):
    """A call of `forward` on numpy token ids under bf16 autocast and inference mode, returning
    last_hidden_state. A closure of its own, so `inference` can delete the model it holds between
    models."""
    import torch

    def call(ids):
        with torch.inference_mode(), torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            token_ids = torch.from_numpy(ids).to(device, non_blocking=True)
            return forward(
                input_ids=token_ids,
                token_type_ids=torch.zeros_like(token_ids),
                attention_mask=torch.ones_like(token_ids),
            ).last_hidden_state

    return call


def inference(args, report, save, device):
    import torch
    from transformers import BertModel

    models = {"tiny": TINY} if args.tiny else {name: INFERENCE_MODELS[name] for name in args.inference_models}
    seq_len = 16 if args.tiny else args.inference_length
    results = report["inference"] = {
        "seq_len": seq_len,
        "autocast": "bfloat16",
        "compiled": args.compile,
        "input": "numpy int64 token ids, copied to the device in each timed call",
        "output": "last_hidden_state, synchronized, not copied back",
        "models": {},
    }
    rng = np.random.default_rng(0)
    for name, shape in models.items():
        if elapsed() > args.deadline_s - args.phase_reserve_s:
            results["models"][name] = {"skipped": f"deadline: {elapsed():.0f} s of {args.deadline_s} s"}
            save()
            continue
        torch.manual_seed(0)
        model = BertModel(bert_config(shape, 0.0, 0.0), add_pooling_layer=True).to(device).eval()
        forward = maybe_compile(model, args)
        call = autocast_call(forward, device)

        entry = results["models"][name] = {"shape": shape}
        for batch, repeats in ((1, args.latency_repeats), (args.throughput_batch, args.throughput_repeats)):

            def ids_of():
                return rng.integers(1, shape["vocabulary_size"], (batch, seq_len)).astype("int64")

            times = time_calls(call, ids_of, repeats, device)
            entry[f"batch_{batch}"] = {
                "repeats": repeats,
                "latency_ms_p50": 1e3 * float(np.median(times)),
                "latency_ms_p90": 1e3 * float(np.percentile(times, 90)),
                "sequences_per_s": batch / float(np.median(times)),
            }
            print(
                f"torch inference {name} batch {batch}: {entry[f'batch_{batch}']['latency_ms_p50']:.2f} ms "
                f"p50, {entry[f'batch_{batch}']['sequences_per_s']:,.0f} sequences/s",
                flush=True,
            )
        save()
        del model, forward, call


def environment():
    import torch
    import transformers

    cuda = torch.cuda.is_available()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "cuda": torch.version.cuda if cuda else None,
        "keras_imported": "keras" in sys.modules,
    }


def write(path, report):
    report["elapsed_s"] = elapsed()
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temporary = f"{path}.partial-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    os.replace(temporary, path)  # atomic, as keras_bert_impl.atomic_write (not imported: no Keras here)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument("--output", required=True, help="the results file (JSON), rewritten after every run")
    parser.add_argument(
        "--phases", nargs="+", default=["pretrain", "inference"], choices=["pretrain", "inference"]
    )
    parser.add_argument("--tiny", action="store_true", help="toy sizes on the CPU (the suite's check)")
    parser.add_argument(
        "--pretrain-batches", type=int, nargs="+", default=None, help="default 256 512 (--tiny: 4)"
    )
    parser.add_argument("--pretrain-steps", type=int, default=None, help="timed steps (default 30, --tiny 2)")
    parser.add_argument(
        "--warmup-steps", type=int, default=3, help="untimed first steps (the first compiles)"
    )
    parser.add_argument("--dropout", type=float, default=0.1, help="hidden dropout (BERT's 0.1)")
    parser.add_argument(
        "--attention-dropout",
        type=float,
        default=0.0,
        help="dropout on the attention probabilities (default 0, gpu_bench's fused-attention runs)",
    )
    parser.add_argument(
        "--mlm-head",
        choices=["masked", "full"],
        default="masked",
        help="the masked-LM head on the masked positions only (ours, NVIDIA's) or at every position",
    )
    parser.add_argument(
        "--no-compile", dest="compile", action="store_false", help="eager PyTorch, no torch.compile"
    )
    parser.add_argument("--compile-mode", default=None, help="torch.compile's mode (default: its default)")
    parser.add_argument(
        "--inference-models", nargs="+", default=["bert_base", "minilm"], choices=sorted(INFERENCE_MODELS)
    )
    parser.add_argument("--inference-length", type=int, default=128, help="tokens per sequence in inference")
    parser.add_argument("--throughput-batch", type=int, default=None, help="default 256 (--tiny: 8)")
    parser.add_argument(
        "--latency-repeats", type=int, default=None, help="batch-1 calls timed (default 200, --tiny 3)"
    )
    parser.add_argument(
        "--throughput-repeats", type=int, default=None, help="large-batch calls timed (default 20, --tiny 2)"
    )
    parser.add_argument(
        "--deadline-s", type=float, default=300.0, help="stop starting work after this many seconds"
    )
    parser.add_argument("--phase-reserve-s", type=float, default=40.0)
    args = parser.parse_args(argv)
    args.pretrain_batches = args.pretrain_batches or ([4] if args.tiny else [256, 512])
    args.pretrain_steps = args.pretrain_steps or (2 if args.tiny else 30)
    args.throughput_batch = args.throughput_batch or (8 if args.tiny else 256)
    args.latency_repeats = args.latency_repeats or (3 if args.tiny else 200)
    args.throughput_repeats = args.throughput_repeats or (2 if args.tiny else 20)
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    report = {
        "benchmark": "BERT on a GPU through PyTorch and transformers: the peer of bench/gpu/gpu_bench.py",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python -m bench.gpu.torch_peer " + " ".join(sys.argv[1:] if argv is None else argv),
        "tiny": args.tiny,
        "environment": environment(),
    }
    name, peak = datasheet_peak(report["environment"]["device"])
    report["datasheet"], report["datasheet_bf16_tflops"] = name, peak
    print(json.dumps(report["environment"]), flush=True)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = (
            True  # only float32 matmuls outside autocast, as XLA's default
        )

    def save():
        write(args.output, report)

    save()
    run_phases((("pretrain", pretrain), ("inference", inference)), args, report, save, device)


if __name__ == "__main__":
    main()
