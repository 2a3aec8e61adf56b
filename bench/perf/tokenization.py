"""Tokenization throughput: our BertPreprocessor vs Hugging Face tokenizers vs tf-text's BertTokenizer.

Sentences/s on the 52,659 real sentences of the parity test
(tests/tokenization/references.py: Pang & Lee's 4,000 MR sentences and the
48,659 line-sentences of the 1,500 full reviews), uncased MiniLM vocabulary
(data/minilm/vocab.txt, tokenizer.json), sequence length 128. Variants:

  ours_full        BertPreprocessor(vocab, sequence_length=128) on a batch of Python
                   strings: tf.constant, UTF-8 check, normalize, WordPiece, word-length
                   rule, truncate, pack [CLS] A [SEP], pad -> three int32 [B, 128] tensors
                   (a tf.function with a [None] string signature)
  hf_full          tokenizers.Tokenizer.from_file(tokenizer.json).encode_batch(batch) with
                   truncation and padding at 128 (the Rust fast BertTokenizer); outputs stay
                   Encoding objects (not converted to arrays: flatters HF slightly)
  tftext_bert      tf_text.BertTokenizer (the older, ICU-based one; lower_case=True) tokenize
                   only: ragged word pieces, no packing
  ours_tokenize    diagnostics: BertPreprocessor.tokenize alone (ragged ids, no packing) ...
  ours_wordpiece   ... FastBertTokenizer with our normalizer model alone (no UTF-8 check,
                   no word-length rule) ...
  tftext_fast      ... and tf-text's stock FastBertTokenizer (its own normalizer) alone

each at batch sizes 256 and 1024, and ours_full also through tf.data
(`from_tensor_slices(...).batch(B).map(pre, num_parallel_calls=AUTOTUNE)`,
tf.data threads as the mode allows). Two modes, each in its own process:

  single_thread    tf.config.threading intra/inter op = 1 (set before any op runs),
                   tf.data private threadpool 1, RAYON_NUM_THREADS=1 and
                   TOKENIZERS_PARALLELISM=false for tokenizers
  default_threads  everything at its defaults (this machine: os.cpu_count() cores)

Timing: per mode, one warm-up pass of every variant, then `--repeats` rounds; each
round times one full pass over the sentences of every variant, in an order rotated
each round, so that load from other processes hits all variants alike. Reported:
sentences/s at the median and best pass (wall clock), sentences per CPU-second
of this process (less disturbed by other processes on a shared machine), and,
per round, the ratio of HF's time to ours (the paired median of those ratios is
the least noisy wall-clock figure).

    make bench-tokenization     # or:
    python -m bench.perf.tokenization --repeats 7 --output bench/results/tokenization.json
    python -m bench.perf.tokenization --repeats 2 --sentences 12000   # quick look

A full run takes about 6-10 minutes on a busy 2-core machine.
"""

import argparse
import json
import os
import statistics
import sys
import time

from bench.common import machine_info, read_loadavg, run_json_child, write_report

SEQUENCE_LENGTH = 128
BATCH_SIZES = (256, 1024)
MODES = ("single_thread", "default_threads")


# --- child: one mode, all variants ------------------------------------------------


def _batches(sentences, size):
    return [sentences[i : i + size] for i in range(0, len(sentences), size)]


def _tf_variant(fn, chunks):
    import tensorflow as tf

    def run():
        for chunk in chunks:
            fn(tf.constant(chunk))

    return run


def _hf_variant(hf, chunks):
    def run():
        for chunk in chunks:
            hf.encode_batch(chunk)

    return run


def time_variants(variants, repeats):
    """(seconds, cpu_seconds, loadavg per round) of `repeats` rounds of every variant, in an order
    rotated every round, after one warm-up call each (tracing, thread pools, caches)."""
    names = list(variants)
    for name in names:
        variants[name]()
    seconds = {name: [] for name in names}
    cpu_seconds = {name: [] for name in names}
    loads = [read_loadavg()]
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            start, start_cpu = time.perf_counter(), time.process_time()
            variants[name]()
            seconds[name].append(time.perf_counter() - start)
            cpu_seconds[name].append(time.process_time() - start_cpu)
        loads.append(read_loadavg())
    return seconds, cpu_seconds, loads


def run_child(mode, repeats, limit):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import tensorflow as tf

    if mode == "single_thread":
        # Before any op runs: TF fixes its thread pools at the first op.
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    import tensorflow_text as tf_text
    from tokenizers import Tokenizer

    from keras_bert_impl.tokenization import BertPreprocessor, read_vocabulary

    # The corpus of the tokenization parity tests, so the throughput is measured on the
    # sentences whose ids are checked against Hugging Face's.
    from tests.tokenization import references

    tf.get_logger().setLevel("ERROR")
    sentences = references.real_sentences()[:limit]
    vocab = read_vocabulary(references.VOCAB)
    pre = BertPreprocessor(vocab, sequence_length=SEQUENCE_LENGTH)
    spec = [tf.TensorSpec([None], tf.string)]
    full = tf.function(pre, input_signature=spec)
    tokenize = tf.function(pre.tokenize, input_signature=spec)
    wordpiece = tf.function(pre.tokenizer.tokenize, input_signature=spec)
    stock = tf_text.FastBertTokenizer(vocab=vocab, token_out_type=tf.int32, lower_case_nfd_strip_accents=True)
    stock_fn = tf.function(stock.tokenize, input_signature=spec)
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(vocab, tf.range(len(vocab), dtype=tf.int64)), num_oov_buckets=1
    )
    old = tf_text.BertTokenizer(table, lower_case=True, token_out_type=tf.int32)
    old_fn = tf.function(old.tokenize, input_signature=spec)
    hf = Tokenizer.from_file(references.HF_TOKENIZER)
    hf.enable_truncation(SEQUENCE_LENGTH, strategy="longest_first")
    hf.enable_padding(length=SEQUENCE_LENGTH)

    def tf_variant(fn, size):
        return _tf_variant(fn, _batches(sentences, size))

    def tf_data_variant(size):
        options = tf.data.Options()
        if mode == "single_thread":
            options.threading.private_threadpool_size = 1
            options.threading.max_intra_op_parallelism = 1
        all_sentences = tf.constant(sentences)
        dataset = (
            tf.data.Dataset.range(0, len(sentences), size)
            .map(lambda start: all_sentences[start : start + size])
            .map(pre, num_parallel_calls=tf.data.AUTOTUNE)
            .prefetch(tf.data.AUTOTUNE)
            .with_options(options)
        )

        def run():
            for _ in dataset:
                pass

        return run

    def hf_variant(size):
        return _hf_variant(hf, _batches(sentences, size))

    variants = {}
    for size in BATCH_SIZES:
        variants[f"ours_full@{size}"] = tf_variant(full, size)
        variants[f"hf_full@{size}"] = hf_variant(size)
        variants[f"tftext_bert@{size}"] = tf_variant(old_fn, size)
        variants[f"ours_tokenize@{size}"] = tf_variant(tokenize, size)
        variants[f"ours_wordpiece@{size}"] = tf_variant(wordpiece, size)
        variants[f"tftext_fast@{size}"] = tf_variant(stock_fn, size)
        variants[f"ours_full_tfdata@{size}"] = tf_data_variant(size)

    # Same work check: ours and HF give the same ids on these sentences.
    check = sentences[:2000]
    ours_ids = full(tf.constant(check))["token_ids"].numpy().tolist()
    same_ids = ours_ids == [e.ids for e in hf.encode_batch(check)]

    seconds, cpu_seconds, loads = time_variants(variants, repeats)
    return {
        "mode": mode,
        "sentences": len(sentences),
        "same_ids_as_hf_on_first_2000": same_ids,
        "tf_intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "tf_inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "RAYON_NUM_THREADS": os.environ.get("RAYON_NUM_THREADS"),
        "TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM"),
        "loadavg_per_round": loads,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
    }


# --- parent: both modes, summary ------------------------------------------------


def summarize(child):
    n = child["sentences"]
    rows = {}
    for name, secs in child["seconds"].items():
        cpu = child["cpu_seconds"][name]
        rows[name] = {
            "sentences_per_s_median": round(n / statistics.median(secs)),
            "sentences_per_s_best": round(n / min(secs)),
            "sentences_per_cpu_s_median": round(n / statistics.median(cpu)),
            "seconds_per_pass": [round(x, 4) for x in secs],
            "cpu_seconds_per_pass": [round(x, 4) for x in cpu],
        }
    ratios = {}
    for size in BATCH_SIZES:
        hf, hf_cpu = child["seconds"][f"hf_full@{size}"], child["cpu_seconds"][f"hf_full@{size}"]
        for name in (f"ours_full@{size}", f"ours_full_tfdata@{size}", f"tftext_bert@{size}"):
            mine, mine_cpu = child["seconds"][name], child["cpu_seconds"][name]
            ratios[f"{name} / hf_full@{size}"] = {
                "paired_median": round(statistics.median(h / m for h, m in zip(hf, mine)), 2),
                "best_over_best": round(min(hf) / min(mine), 2),
                "cpu_time_paired_median": round(
                    statistics.median(h / m for h, m in zip(hf_cpu, mine_cpu)), 2
                ),
            }
    # Where ours spends its time: best passes, per sentence, at each batch size.
    breakdown = {}
    for size in BATCH_SIZES:
        stages = ("ours_wordpiece", "ours_tokenize", "ours_full")
        best = {k: min(child["seconds"][f"{k}@{size}"]) / n * 1e6 for k in stages}
        breakdown[f"batch_{size}_microseconds_per_sentence"] = {
            "wordpiece (tf.constant + normalizer + FastWordpiece)": round(best["ours_wordpiece"], 2),
            "utf8 check + word-length rule": round(best["ours_tokenize"] - best["ours_wordpiece"], 2),
            "truncate + pack + pad": round(best["ours_full"] - best["ours_tokenize"], 2),
            "total": round(best["ours_full"], 2),
        }
    return {"results": rows, "ratios_vs_hf": ratios, "ours_breakdown": breakdown}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--output", help="JSON results file (default: print only)")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes per variant (default 5)")
    parser.add_argument("--sentences", type=int, default=None, help="use only the first N sentences")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1. Received: {args.repeats}")

    if args.child:
        print(json.dumps(run_child(args.child, args.repeats, args.sentences)))
        return 0

    machine = machine_info()
    report = {
        "sequence_length": SEQUENCE_LENGTH,
        "batch_sizes": list(BATCH_SIZES),
        "repeats": args.repeats,
        "corpus": (
            "tests/tokenization/references.py real_sentences(): 4,000 MR sentences + 48,659 review lines"
        ),
        "modes": {},
    }
    for mode in args.modes:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow")
        if mode == "single_thread":
            env.update(RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        else:
            env.pop("RAYON_NUM_THREADS", None)
            env.pop("TOKENIZERS_PARALLELISM", None)
        cmd = [sys.executable, "-m", __spec__.name, "--child", mode, "--repeats", str(args.repeats)]
        if args.sentences:
            cmd += ["--sentences", str(args.sentences)]
        print(f"[{mode}] running ...", file=sys.stderr, flush=True)
        child = run_json_child(cmd, env=env)
        report["modes"][mode] = {**{k: v for k, v in child.items() if k != "seconds"}, **summarize(child)}
        for name, row in report["modes"][mode]["results"].items():
            median, best = row["sentences_per_s_median"], row["sentences_per_s_best"]
            print(f"[{mode}] {name:28s} {median:>9,d} sent/s (best {best:,d})", file=sys.stderr)
        for name, ratio in report["modes"][mode]["ratios_vs_hf"].items():
            print(f"[{mode}] {name:44s} x{ratio['paired_median']}", file=sys.stderr)
    single = report["modes"].get("single_thread")
    if single:
        ratio = single["ratios_vs_hf"][f"ours_full@{BATCH_SIZES[-1]} / hf_full@{BATCH_SIZES[-1]}"][
            "paired_median"
        ]
        report["target"] = {"ours_full >= 8x hf_full, single thread, batch 1024": ratio >= 8, "ratio": ratio}
    if args.output:
        write_report(args.output, "tokenization throughput, sentences/s", report, machine)
    else:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
