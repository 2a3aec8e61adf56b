"""docs/benchmarks.md's speed tables (one per CPU kind, one per GPU) and its chart of
sentences/s by runtime and precision per CPU kind, made from the results files alone:

    .venv/bin/python -m bench.charts.speed_chart            # rewrites the tables and the PNG
    .venv/bin/python -m bench.charts.speed_chart --check    # exit 1 when the page is out of date

(`make bench-chart`). Every figure is read from bench/results/ (a file holding one run per CPU
kind, as cpu_peers.json does, gives each run to its own CPU's table); a results file's CPU
kind is `CpuFeatures.describe()` of the CPU it recorded, so a run on a new kind of CPU gets a
table and a chart panel of its own. The tables sit between the two marker lines of the page;
the rest of the page is left as it is. Each row links the results file it comes from, which
holds the command that made it.
"""

import argparse
import json
import os
import statistics
import sys

from bench.common import REPO, RESULTS, cpu_features_class

PAGE = os.path.join(REPO, "docs", "benchmarks.md")
CHART = os.path.join(REPO, "docs", "images", "speed_by_cpu.png")
BEGIN = "<!-- speed tables: made by bench/charts/speed_chart.py from bench/results/ (make bench-chart) -->"
END = "<!-- end of the speed tables -->"

# cpu_peers.json's runtime keys: (runtime, precision) as the chart and tables name them.
# `*_onednn_avx2` (oneDNN capped at AVX2 on an AVX-512 CPU) is a diagnostic, not a runtime
# a user picks: it stays in the results file only.
RUNTIMES = {
    "ours_fp32": ("ours (TensorFlow)", "fp32"),
    "ours_bf16": ("ours (TensorFlow)", "bf16"),
    "ours_int8": ("ours (TensorFlow)", "int8"),
    "ours_fp32_litert": ("ours (LiteRT)", "fp32"),
    "onnxruntime_fp32": ("ONNX Runtime", "fp32"),
    "onnxruntime_int8": ("ONNX Runtime", "int8"),
    "onnxruntime_int8_per_channel": ("ONNX Runtime", "int8 per channel"),
    "openvino_fp32": ("OpenVINO", "fp32"),
    "openvino_int8": ("OpenVINO", "int8"),
    "pytorch_fp32": ("PyTorch", "fp32"),
    "pytorch_int8": ("PyTorch", "int8"),
}
PRECISIONS = ("fp32", "bf16", "int8", "int8 per channel")


# --- reading the results files -----------------------------------------------------------


def cpu_kind(record):
    """The CPU kind a results record ran on: `CpuFeatures.describe()` of its `machine`, or
    where the file predates the recorded flags, its model with "(extensions not recorded)"."""
    machine = record.get("machine")
    if not isinstance(machine, dict) or not machine.get("cpu_model"):
        return None
    if not machine.get("cpu_simd"):
        return f"{machine['cpu_model']} (extensions not recorded)"
    return cpu_features_class()(machine["cpu_model"], machine["cpu_simd"]).describe()


def load_records(results=RESULTS):
    """[(file name, record)] for every results file directly in `results`, a file holding
    `runs` (one per CPU kind) giving one record per run, in file-name order."""
    records = []
    for name in sorted(os.listdir(results)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(results, name), encoding="utf-8") as f:
            content = json.load(f)
        runs = content.get("runs")
        per_cpu = (
            isinstance(runs, dict)
            and runs
            and all(isinstance(run, dict) and "machine" in run for run in runs.values())
        )
        if per_cpu:
            records += [(name, run) for run in runs.values()]
        else:
            records.append((name, content))
    return records


def load_gpu_records(results=RESULTS):
    """[(path under results, record)] for every GPU results file (bench/gpu/gpu_bench.py's)."""
    records = []
    for root, _, names in sorted(os.walk(os.path.join(results, "gpu"))):
        for name in sorted(names):
            if name.endswith(".json"):
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    content = json.load(f)
                if isinstance(content.get("environment"), dict):
                    records.append((os.path.relpath(os.path.join(root, name), results), content))
    return records


# --- the rows of each benchmark ----------------------------------------------------------


def _n(value, digits=1):
    return f"{value:,.{digits}f}"


def _span(values, digits=4):
    low, high = min(values), max(values)
    return _n(low, digits) if low == high else f"{_n(low, digits)}-{_n(high, digits)}"


def peer_runtimes(record):
    """{(runtime, precision): its results} of a cpu_peers run, the diagnostic rows left out."""
    return {RUNTIMES[key]: value for key, value in record["runtimes"].items() if key in RUNTIMES}


def _sps(result):
    return result["sentences_per_second_summary"]["median"]


def _p50(result):
    return result["latency_batch1_ms"]["p50"]


def _fastest_peer(record, precision, figure, lowest=False):
    """(name, value, ours over it per round or None) of the peer (not ours) of `precision`
    ("int8" counting per-channel int8) with the best `figure(result)`, or None. The ratio is
    the run's own (`ratios`: the median of the per-round ratios), where it recorded one."""
    peers = [
        (key, figure(value))
        for key, value in record["runtimes"].items()
        if key in RUNTIMES and not key.startswith("ours") and RUNTIMES[key][1].split()[0] == precision
    ]
    if not peers:
        return None
    key, value = (min if lowest else max)(peers, key=lambda peer: peer[1])
    runtime, exact = RUNTIMES[key]
    name = runtime + (f" ({exact.split(' ', 1)[1]})" if " " in exact else "")
    ratio = record.get("ratios", {}).get(f"ours_{precision}_over_{key}", {}).get("median")
    return name, value, ratio


def cpu_peers_rows(record):
    runtimes = peer_runtimes(record)
    ours = {(r, p): v for (r, p), v in runtimes.items() if r.startswith("ours")}
    setting = (
        f"MR text → labels, sentences/s: fine-tuned MiniLM-L6, {record['sentences']:,} sentences, "
        f"batch {record['batch_size']}, {record['threads']} threads, "
        f"median of {record['rounds']} rounds"
    )

    def ours_cell(figure, unit="", precisions=PRECISIONS):
        return " · ".join(
            f"{p}{' on LiteRT' if 'LiteRT' in r else ''} {_n(figure(v))}{unit}"
            for p in precisions
            for (r, q), v in ours.items()
            if q == p
        )

    def peers_cell(figure, unit="", lowest=False):
        cells = []
        for precision in ("fp32", "int8"):
            peer = _fastest_peer(record, precision, figure, lowest)
            if peer:
                ratio = f" (ours {peer[2]:.2f}x per round)" if peer[2] and not lowest else ""
                cells.append(f"{precision}: {peer[0]} {_n(peer[1])}{unit}{ratio}")
        return "fastest " + " · ".join(cells)

    accuracy = {
        p: [
            v["accuracy_800_held_out"]
            for (r, q), v in runtimes.items()
            if not r.startswith("ours") and q.split()[0] == p
        ]
        for p in ("fp32", "int8")
    }
    return [
        (setting, ours_cell(_sps), peers_cell(_sps)),
        (
            "same, batch 1: p50 latency",
            ours_cell(_p50, " ms", ("fp32", "int8")),
            peers_cell(_p50, " ms", lowest=True),
        ),
        (
            f"same, accuracy on the {record['held_out']} held-out sentences",
            " · ".join(
                f"{p} {v['accuracy_800_held_out']:.4f}"
                for (r, p), v in ours.items()
                if r == "ours (TensorFlow)"
            ),
            " · ".join(f"{p} {_span(values)}" for p, values in accuracy.items() if values),
        ),
    ]


def precision_process_rows(record):
    processes = record["processes"]
    return [
        (
            f"whole `kbert predict --file` process, {record['sentences']:,} sentences, seconds (median of "
            f"{record['rounds']}; cached: the converted file kept from an earlier run)",
            " · ".join(
                f"{name.replace('_', ' ')} {_n(value['seconds_summary']['median'])}"
                for name, value in processes.items()
            ),
            "",
        )
    ]


def backbone_forward_rows(record):
    settings, results = record["settings"], record["results"]
    best = record["best_variant_per_model"]

    def cell(model):
        result = results[best[model]]
        share = result["fraction_of_matmul_peak_median"]
        return f"{_n(result['sequences_per_second_median'], 2)} ({share:.0%})"

    return [
        (
            f"BERT-base forward, sequences/s (share of the machine's matmul peak): length "
            f"{settings['sequence_length']}, batch {settings['batch_size']}, {settings['dtype']}",
            cell("ours"),
            f"KerasHub {cell('kerashub')} · Model Garden {cell('model_garden')}",
        )
    ]


def tokenization_rows(record):
    mode = record["modes"]["single_thread"]
    results = mode["results"]

    def span(prefix):
        return _span(
            [v["sentences_per_s_median"] for k, v in results.items() if k.startswith(prefix + "@")], 0
        )

    threads = f"{mode['tf_intra_op_threads']} thread" + ("s" if mode["tf_intra_op_threads"] > 1 else "")
    return [
        (
            f"tokenize + pack + pad, {mode['sentences']:,} sentences, {threads}, sentences/s "
            f"(batch {'-'.join(str(b) for b in record['batch_sizes'])})",
            span("ours_full"),
            f"Hugging Face `tokenizers` {span('hf_full')}",
        )
    ]


def pretraining_memory_rows(record):
    small, large = (record["runs"][size]["corpus_bytes"] for size in ("1x", "10x"))
    return [
        (
            f"pretraining data: peak memory of a corpus {large / small:.0f}x larger, over the smaller one's",
            f"{record['ratio_large_over_small']:.3f}x",
            "",
        )
    ]


def pretraining_speed_rows(record):
    settings, summary = record["settings"], record["summary"]["jit_compile=False"]
    return [
        (
            f"{settings['preset']} pretraining (MLM + NSP), steps/s: batch {settings['batch_size']}, "
            f"length {settings['sequence_length']}, median of {settings['rounds']} rounds",
            _n(summary["ours_steps_per_second_median"], 2),
            f"KerasHub `BertMaskedLM` (MLM only) {_n(summary['kerashub_steps_per_second_median'], 2)}",
        )
    ]


def finetune_mr_rows(record):
    settings, ours, torch = record["settings"], record["ours"], record["pytorch_transformers"]
    return [
        (
            f"MR fine-tune of MiniLM, seconds per epoch (median of {settings['epochs']}): length "
            f"{settings['seq_len']}, batch {settings['batch_size']}",
            f"{_n(statistics.median(ours['epoch_train_seconds']))} (accuracy {ours['accuracy']:.4f})",
            f"PyTorch + transformers {_n(statistics.median(torch['epoch_seconds']))} "
            f"(accuracy {torch['test_accuracy']:.4f})",
        )
    ]


def embed_throughput_rows(record):
    settings = record["settings"]
    return [
        (
            f"sentence vectors (`kbert embed`), MiniLM mean pooling, {settings['sentences']:,} sentences, "
            f"sentences/s",
            f"{_n(record['ours']['sentences_per_second'])} (whole process "
            f"{_n(record['ours_kbert_embed_process']['sentences_per_second'])})",
            f"PyTorch + transformers {_n(record['pytorch_length_sorted']['sentences_per_second'])} "
            f"sorted by length, {_n(record['pytorch_input_order']['sentences_per_second'])} in file order",
        )
    ]


def semantic_search_rows(record):
    settings, latency = record["settings"], record["latency"]
    search = {kind: latency[kind]["search_only"]["p50_ms"] for kind in ("hnsw", "exact")}
    recall = record["recall_at_10_hnsw_vs_exact"]
    return [
        (
            f"semantic search over {settings['sentences']:,} sentences, k {settings['k']}: search p50",
            f"HNSW {_n(search['hnsw'], 2)} ms (recall@{settings['k']} {recall:.3f}, built in "
            f"{_n(record['build']['hnsw']['seconds'])} s) · exact {_n(search['exact'], 2)} ms",
            "",
        )
    ]


def finetune_mr_buckets_rows(record):
    settings, seconds = record["settings"], record["median_epoch_seconds"]
    accuracy = record["mean_accuracy"]
    return [
        (
            f"MR fine-tune of MiniLM, seconds per epoch (median over seeds {settings['seeds'][0]}-"
            f"{settings['seeds'][-1]}): length {settings['seq_len']}, batch {settings['batch_size']}",
            f"length buckets {_n(seconds['buckets'])} (accuracy {accuracy['buckets']:.4f}) · "
            f"`--fixed-length` {_n(seconds['fixed_length'])} (accuracy {accuracy['fixed_length']:.4f})",
            f"PyTorch + transformers, cut to the longest row {_n(seconds['pytorch_padding_longest'])}",
        )
    ]


def inference_throughput_rows(record):
    speed = record["sentences_per_s"]
    return [
        (
            f"MR text → labels (`TextPredictor`), sentences/s: {record['sentences']:,} sentences, batch "
            f"{record['batch_size']}, {record['rounds']} rounds",
            " · ".join(f"{p} {_n(speed['ours_' + p])}" for p in ("fp32", "bf16", "int8")),
            f"PyTorch + transformers sorted by length {_n(speed['pytorch_length_order'])} · "
            + " · ".join(
                f"KerasHub `BertTextClassifier` at length {key.rsplit('len', 1)[1]} {_n(value)}"
                for key, value in speed.items()
                if key.startswith("kerashub_len")
            ),
        )
    ]


def inference_precision_rows(record):
    speed, accuracy = record["sentences_per_s"], record["mr_test_accuracy"]
    agree = record["top_label_agreement_with_fp32"]
    names = {"int8_keras_quantize": 'Keras `quantize("int8")`'}
    return [
        (
            f"each precision on {record['sentences_timed']:,} MR sentences, sentences/s (MR test accuracy; "
            f"labels equal to fp32's)",
            " · ".join(
                f"{names.get(p, p)} {_n(speed[p])} ({accuracy[p]:.4f}; {agree[p]:.1%})" for p in speed
            ),
            "",
        )
    ]


def serve_load_rows(record):
    model, settings, latency = record["model"], record["settings"], record["latency_ms"]
    how = model.get("precision", "fp32") + (" on LiteRT" if model.get("runtime") == "litert" else "")
    if record.get("auto_picked"):  # auto's pick on the run's CPU (files before it: not recorded)
        how += f" ({record['auto_picked']})"
    if model.get("litert_cache") == "warm":
        how += ", converted file cached"
    # An export's server without TensorFlow (serve_load.py --lite): each call runs up to its
    # longest row; its start-up is lite_process.json's (this file's went through python -m).
    lite = "keras_bert_lite" in model.get("export", "")
    if lite:
        how += " on LiteRT, an export's .tflite without TensorFlow"
    length = "each call cut to its longest row" if lite else f"length {model['seq_len_padded_to']}"
    ready = "" if lite else f", ready in {_n(record['server_start_up_seconds'])} s"
    offline = (
        f", {record['served_over_offline']:.2f}x its batch-32 rate" if "served_over_offline" in record else ""
    )
    per_request = settings["sentences_per_request"].split(",")[0]
    return [
        (
            f"`kbert serve` under load, {how}: {settings['clients']} clients, {per_request} sentences per "
            f"request, {length}",
            f"{_n(record['throughput_sentences_per_s'])} sentences/s{offline}, "
            f"p50 {_n(latency['p50'] / 1e3, 2)} s, p99 {_n(latency['p99'] / 1e3, 2)} s{ready}",
            "",
        )
    ]


# Results file (its name without .json) -> its rows; the other results files are shown on the
# pages of their topic (training, serving, export) or in bench/README.md.
ROWS = {
    "cpu_peers": cpu_peers_rows,
    "precision_process": precision_process_rows,
    "backbone_forward": backbone_forward_rows,
    "tokenization": tokenization_rows,
    "pretraining_memory": pretraining_memory_rows,
    "pretraining_speed": pretraining_speed_rows,
    "finetune_mr": finetune_mr_rows,
    "finetune_mr_buckets": finetune_mr_buckets_rows,
    "inference_throughput": inference_throughput_rows,
    "inference_precision": inference_precision_rows,
    "embed_throughput": embed_throughput_rows,
    "semantic_search": semantic_search_rows,
    "serve_load": serve_load_rows,
}
# Benchmarks whose runs on other CPUs or settings are written under longer names
# (serve_load_xeon_int8.json): those files get the benchmark's rows too.
VARIANTS = ("serve_load",)


def rows_of(stem):
    """The name in ROWS of a results file's rows (by the file's name without .json), or None."""
    if stem in ROWS:
        return stem
    return next((name for name in VARIANTS if stem.startswith(name + "_")), None)


def cpu_tables(records):
    """{CPU kind: [(what, ours, peers, file name)]}, the kinds with the most extensions last
    and the kinds whose flags were not recorded after them."""
    tables = {}
    for name, record in records:
        benchmark = rows_of(name[: -len(".json")])
        if benchmark:
            kind = cpu_kind(record) or "CPU not recorded"
            place = list(ROWS).index(benchmark)
            tables.setdefault(kind, []).extend((place,) + row + (name,) for row in ROWS[benchmark](record))

    def order(kind):
        unknown = "not recorded" in kind
        return unknown, kind.count(",") - kind.count("no "), kind

    return {
        kind: [row[1:] for row in sorted(tables[kind], key=lambda row: row[0])]
        for kind in sorted(tables, key=order)
    }


def _gpu_variant(pretrain):
    dropout = pretrain["dropout"]
    attention = dropout if pretrain.get("attention_dropout") is None else pretrain["attention_dropout"]
    gelu = "tanh GELU" if pretrain.get("activation") == "gelu_approximate" else "exact GELU"
    fused = ", fused attention" if attention == 0 else ""
    return f"dropout {dropout:g}, attention dropout {attention:g}{fused}, {gelu}"


def gpu_tables(records):
    """{GPU: [(what, figure, file)]}: per pretraining setting its fastest run by MFU (model.fit
    timed without callbacks; runs that did not record it are left out), and the fine-tune run
    with the most seeds."""
    mfu = "mfu_datasheet_without_callbacks"
    best, finetune = {}, {}
    for name, record in records:
        device = record["environment"]["device_kind"]
        pretrain = record.get("pretrain")
        for run in (pretrain or {}).get("runs", []):
            if run.get(mfu) is None:
                continue
            key = (device, _gpu_variant(pretrain))
            if key not in best or run[mfu] > best[key][1][mfu]:
                best[key] = (name, run, record)
        tune = record.get("finetune")
        seeds = finetune[device][1]["summary"]["runs"] if device in finetune else 0
        if tune and tune["summary"]["runs"] > seeds:
            finetune[device] = (name, tune)
    tables = {}
    for (device, variant), (name, run, record) in sorted(best.items()):
        pretrain = record["pretrain"]
        tables.setdefault(device, []).append(
            (
                f"{pretrain['preset']} pretraining, {pretrain['dtype_policy']}, length "
                f"{pretrain['seq_len']}: {variant}",
                f"batch {run['batch']}: {_n(run['step_s_fit_without_callbacks'] * 1e3)} ms/step, "
                f"MFU {run[mfu]:.1%} of {_n(record['datasheet_bf16_tflops'], 0)} TFLOP/s",
                name,
            )
        )
    for device, (name, tune) in sorted(finetune.items()):
        summary = tune["summary"]
        tables.setdefault(device, []).append(
            (
                f"MiniLM fine-tuned on MR, {tune['dtype_policy']}, {tune['epochs']} epochs: test accuracy",
                f"mean {summary['mean']:.4f} over {summary['runs']} seeds "
                f"({_span([summary['min'], summary['max']])})",
                name,
            )
        )
    return tables


# --- the page ------------------------------------------------------------------------------


def _link(name):
    return f"[{os.path.basename(name)}](../bench/results/{name})"


def tables_markdown(records, gpu_records):
    """The markdown between the page's markers: one table per CPU kind, then one per GPU."""
    lines = []
    for kind, rows in cpu_tables(records).items():
        lines += ["", f"### {kind}", "", "| benchmark | ours | peers | results file |", "|---|---|---|---|"]
        lines += [f"| {what} | {ours} | {peers} | {_link(name)} |" for what, ours, peers, name in rows]
    for device, rows in gpu_tables(gpu_records).items():
        lines += ["", f"### {device}", "", "| benchmark | ours | results file |", "|---|---|---|"]
        lines += [f"| {what} | {figure} | {_link(name)} |" for what, figure, name in rows]
    return "\n".join(lines + [""])


def page_with_tables(page_text, tables):
    """`page_text` with what lies between its BEGIN and END lines replaced by `tables`."""
    if page_text.count(BEGIN) != 1 or page_text.count(END) != 1:
        raise ValueError(f"the page must hold the line {BEGIN!r} once and {END!r} once after it")
    head, rest = page_text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{tables}{END}{tail}"


# --- the chart -----------------------------------------------------------------------------


def draw_chart(records, path):
    """One panel per CPU kind of cpu_peers.json: sentences/s of each runtime, one bar per
    precision, the value written at the bar's end. Returns the figure, written to `path`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    kinds = list(cpu_tables(records))
    runs = sorted(
        ((cpu_kind(record), record) for name, record in records if name == "cpu_peers.json"),
        key=lambda run: kinds.index(run[0]),
    )
    colours = dict(zip(PRECISIONS, ("#4C72B0", "#DD8452", "#55A868", "#8FD19E")))
    figure = Figure(figsize=(10, 1.2 + 3.4 * len(runs)), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(runs), 1, squeeze=False)[:, 0]
    for ax, (kind, record) in zip(axes, runs):
        runtimes = peer_runtimes(record)
        names = list(dict.fromkeys(r for r, _ in runtimes))
        height = 0.8 / max(sum(1 for r2, _ in runtimes if r2 == r) for r in names)
        top = max(_sps(v) for v in runtimes.values())
        for row, runtime in enumerate(names):
            bars = [(p, runtimes[(runtime, p)]) for p in PRECISIONS if (runtime, p) in runtimes]
            for i, (precision, result) in enumerate(bars):
                y = row + (i - (len(bars) - 1) / 2) * height
                value = _sps(result)
                ax.barh(y, value, height=height * 0.9, color=colours[precision])
                ax.text(value + top * 0.01, y, f"{value:,.0f}", va="center", fontsize=8)
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        ax.set_xlim(0, top * 1.12)
        ax.set_title(
            f"{kind}, {record['date'][:10]}, median of {record['rounds']} rounds", fontsize=10, loc="left"
        )
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel(f"sentences/s (MR text → labels, {records_setting(runs)}; higher is faster)")
    figure.legend(
        handles=[Patch(color=colours[p], label=p) for p in PRECISIONS],
        loc="upper center",
        ncol=len(PRECISIONS),
        frameon=False,
    )
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.5 / figure.get_figheight()))
    from keras_bert_impl.atomic_write import write_atomically

    write_atomically(path, lambda tmp: figure.savefig(tmp, format="png"), suffix=".png")
    return figure


def records_setting(runs):
    """The setting the runs share, in words (their sentence count, batch and threads)."""
    settings = {(r["sentences"], r["batch_size"], r["threads"]) for _, r in runs}
    return "; ".join(f"{s:,} sentences, batch {b}, {t} threads" for s, b, t in sorted(settings))


def _write_text(path, text):
    from keras_bert_impl.atomic_write import write_atomically

    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    write_atomically(path, write)


# --- command line --------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--results", default=RESULTS, help="the results folder (default bench/results)")
    parser.add_argument("--page", default=PAGE, help="the page whose marked tables are rewritten")
    parser.add_argument("--chart", default=CHART, help="the PNG to write")
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when the page's tables differ from the results files",
    )
    args = parser.parse_args(argv)
    records = load_records(args.results)
    with open(args.page, encoding="utf-8") as f:
        text = f.read()
    try:
        updated = page_with_tables(text, tables_markdown(records, load_gpu_records(args.results)))
    except ValueError as error:
        print(f"--page {args.page}: {error}", file=sys.stderr)
        return 2
    if args.check:
        if updated != text:
            print(
                f"{os.path.relpath(args.page, REPO)}: its speed tables differ from {args.results}: "
                "run `make bench-chart`",
                file=sys.stderr,
            )
            return 1
        return 0
    if updated != text:
        _write_text(args.page, updated)
    draw_chart(records, args.chart)
    print(f"wrote {os.path.relpath(args.page, REPO)}'s tables and {os.path.relpath(args.chart, REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
