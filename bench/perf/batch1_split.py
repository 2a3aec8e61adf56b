"""Where one sentence's milliseconds go in `TextPredictor.predict` (issue 54's batch-1 latency): the
cpu_peers classifier (made by bench/perf/cpu_peers.py when missing) at fp32 on TensorFlow, fp32 on
LiteRT and int8, one sentence per call, in one process.

Per precision, p50 over --sentences MR sentences (one call each, after a warm-up):
    whole      `predict([text])`: what cpu_peers' batch-1 column times
    tokenize   `batches([text])`: the traced tokenizer, the length sort and the cut to the row's width
    forward    the resolved forward on those ids, outputs read back as NumPy
Then the forward alone on made-up ids of --width wordpieces: every call at [1, width]
(`same_width`), and the widths width .. width + 4 in turn (`changing_width`), which a stream of
real sentences does: the difference is what a new input shape costs the runtime.

bench/perf/litert_profile.py (`--batch 1 --width 16`) gives the LiteRT files' own ms at a fixed
shape in a child that converts nothing, kernel by kernel: what the forward costs without our
wrapper around the interpreter.

    .venv/bin/python -m bench.perf.batch1_split --output bench/results/batch1_split.json
"""

import argparse
import os
import time

import numpy as np

from bench.common import machine_info, tensorflow_threads, wait_for_idle, write_report
from bench.perf.cpu_peers import FOLDER, _prepare

RUNTIMES = {
    "fp32": dict(precision="fp32"),
    "fp32_litert": dict(precision="fp32", runtime="litert"),
    "int8": dict(precision="int8"),
}


def _p50_ms(call, inputs):
    times = []
    for x in inputs:
        start = time.perf_counter()
        call(x)
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times))


def _made_up_ids(width):
    """[1, width] ids of one sentence: [CLS], width - 2 copies of one wordpiece, [SEP]."""
    token_ids = np.full((1, width), 1000, np.int32)
    token_ids[0, 0], token_ids[0, -1] = 101, 102
    return token_ids, np.zeros((1, width), np.int32), np.ones((1, width), np.int32)


def split(model, name, texts, width, repeats):
    from keras_bert_impl.inference import TextPredictor

    predictor = TextPredictor(model, sequence_length=128, batch_size=32, **RUNTIMES[name])
    forward = predictor._forward  # the resolved forward `predict` calls (what is timed apart here)

    def run_forward(ids):
        return {k: np.asarray(v) for k, v in forward(*ids).items()}

    predictor.predict(texts[:64])
    for extra in range(5):
        run_forward(_made_up_ids(width + extra))
    ids = [next(iter(predictor.batches([text])))[1:] for text in texts]
    result = {
        "whole_p50_ms": _p50_ms(lambda text: predictor.predict([text]), texts),
        "tokenize_p50_ms": _p50_ms(lambda text: list(predictor.batches([text])), texts),
        "forward_p50_ms": _p50_ms(run_forward, ids),
        "widths_p50": float(np.median([x[0].shape[1] for x in ids])),
        "same_width_p50_ms": _p50_ms(run_forward, [_made_up_ids(width)] * repeats),
        "changing_width_p50_ms": _p50_ms(run_forward, [_made_up_ids(width + i % 5) for i in range(repeats)]),
    }
    print(name, {k: round(v, 2) for k, v in result.items()}, flush=True)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--sentences", type=int, default=200, help="MR sentences, one call each.")
    parser.add_argument("--width", type=int, default=16, help="Wordpieces of the made-up ids.")
    parser.add_argument("--repeats", type=int, default=100, help="Calls of each made-up-ids pass.")
    parser.add_argument("--runtimes", nargs="+", default=list(RUNTIMES), choices=list(RUNTIMES))
    parser.add_argument("--wait-idle", type=float, default=0)
    parser.add_argument("--output", default=os.path.join("bench", "results", "batch1_split.json"))
    args = parser.parse_args(argv)
    import keras_bert_impl  # noqa: F401  (oneDNN's switch, as kbert sets it, before TensorFlow loads)
    import keras

    texts, _, test_idx, run, *_ = _prepare(FOLDER)
    texts = [str(texts[i]) for i in test_idx[: args.sentences]]
    waited = wait_for_idle(args.wait_idle)
    machine = machine_info(**tensorflow_threads(), waited_for_idle_seconds=waited)
    model = keras.saving.load_model(os.path.join(run, "model.keras"))
    results = {name: split(model, name, texts, args.width, args.repeats) for name in args.runtimes}
    write_report(
        args.output,
        "batch1_split",
        {"model": run, "sentences": len(texts), "width": args.width, "runtimes": results},
        machine,
    )
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
