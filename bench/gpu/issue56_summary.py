"""Issue 56's figures side by side from one run of bench/gpu/run_issue56.sh: pretraining steps/s
and MFU of ours through keras.ops and through the Pallas kernels against PyTorch's, inference
latency (batch 1) and throughput (batch 256) of the three, the Pallas kernels' time per step and
the fused fine-tune's accuracies; and the issue's acceptance lines as true/false (null where a
figure is missing). Reads OUTPUT_DIR's results files, writes OUTPUT_DIR/summary.json.

    python -m bench.gpu.issue56_summary OUTPUT_DIR
"""

import json
import os
import sys

MFU_GOAL = 0.42


def _load(folder, name):
    try:
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _pretrain(report, step_key, mfu_key):
    """{batch: {step_s, steps_per_s, mfu}} of a results file's timed pretraining runs."""
    runs = ((report or {}).get("pretrain") or {}).get("runs", [])
    return {
        str(run["batch"]): {
            "step_s": run[step_key],
            "steps_per_s": 1.0 / run[step_key],
            "mfu": run.get(mfu_key),
        }
        for run in runs
        if step_key in run
    }


def _inference(report):
    models = ((report or {}).get("inference") or {}).get("models", {})
    return {
        name: {key: value for key, value in entry.items() if key.startswith("batch_")}
        for name, entry in models.items()
        if "skipped" not in entry
    }


def _ratio(a, b):
    return a / b if a is not None and b else None


def summarize(folder):
    unfused, fused, torch = (_load(folder, f"{n}.json") for n in ("unfused", "fused", "torch_peer"))
    attribution, finetune = _load(folder, "fused_attribution.json"), _load(folder, "fused_finetune.json")
    ours_key = ("step_s_fit_without_callbacks", "mfu_datasheet_without_callbacks")
    pretrain = {
        "ours_keras_ops": _pretrain(unfused, *ours_key),
        "ours_fused": _pretrain(fused, *ours_key),
        "torch": _pretrain(torch, "step_s_queued", "mfu_datasheet_queued"),
    }
    inference = {
        "ours_keras_ops": _inference(unfused),
        "ours_fused": _inference(fused),
        "torch": _inference(torch),
    }
    summary = {
        "device": ((unfused or fused or {}).get("environment") or {}).get("device_kind"),
        "torch_device": ((torch or {}).get("environment") or {}).get("device"),
        "tiny": bool((unfused or {}).get("tiny")),
        "pretrain": pretrain,
        "inference": inference,
        "pallas_ms_per_step": (attribution or {}).get("pallas_ms_per_step"),
        "by_scope_ms_per_step_top": dict(
            list(((attribution or {}).get("by_scope_ms_per_step") or {}).items())[:12]
        ),
        "finetune": (finetune or {}).get("finetune", {}).get("runs"),
    }
    acceptance = {}
    for batch, run in pretrain["ours_fused"].items():
        theirs = pretrain["torch"].get(batch, {})
        mfu = run["mfu"]
        acceptance[f"pretrain_b{batch}_fused_mfu_at_least_{MFU_GOAL}"] = (
            None if mfu is None else mfu >= MFU_GOAL
        )
        ratio = _ratio(run["steps_per_s"], theirs.get("steps_per_s"))
        summary.setdefault("pretrain_steps_per_s_fused_over_torch", {})[batch] = ratio
        acceptance[f"pretrain_b{batch}_fused_at_least_torch"] = None if ratio is None else ratio >= 1.0
    for name, batches in inference["ours_fused"].items():
        for batch, entry in batches.items():
            theirs = inference["torch"].get(name, {}).get(batch, {})
            ratio = _ratio(entry["sequences_per_s"], theirs.get("sequences_per_s"))
            summary.setdefault("inference_fused_over_torch", {})[f"{name}_{batch}"] = ratio
            acceptance[f"inference_{name}_{batch}_at_least_torch"] = None if ratio is None else ratio >= 1.0
    summary["acceptance"] = acceptance
    return summary


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        raise SystemExit(
            f"usage: python -m bench.gpu.issue56_summary OUTPUT_DIR (a folder run_issue56.sh wrote). "
            f"Received: {argv}"
        )
    summary = summarize(argv[0])
    path = os.path.join(argv[0], "summary.json")
    temporary = f"{path}.partial-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    os.replace(temporary, path)
    for side, batches in summary["pretrain"].items():
        for batch, run in batches.items():
            print(
                f"pretrain {side:15s} batch {batch}: {run['step_s'] * 1e3:8.2f} ms/step, "
                f"{run['steps_per_s']:7.2f} steps/s, "
                f"MFU {run['mfu'] if run['mfu'] is not None else float('nan'):.1%}"
            )
    for side, models in summary["inference"].items():
        for name, batches in models.items():
            for batch, entry in batches.items():
                print(
                    f"inference {side:15s} {name} {batch}: {entry['latency_ms_p50']:8.2f} ms p50, "
                    f"{entry['sequences_per_s']:10,.0f} sequences/s"
                )
    print("acceptance: " + json.dumps(summary["acceptance"]))


if __name__ == "__main__":
    main()
