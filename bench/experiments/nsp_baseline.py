"""How far lexical overlap alone gets on next-sentence prediction, on the same records.

The pretraining item asks for NSP accuracy above 0.6 on the movie reviews. To tell whether
that is a low or a high bar for this corpus, this fits classifiers that see only how much
segment B shares with segment A (no word meanings, no order) on the training records of a
bench/experiments/pretrain_tiny.py run and scores them on its held-out records:

- features per pair: lengths of A and B, Jaccard overlap of their WordPiece sets, the
  IDF-weighted share of B's tokens found in A, and the TF-IDF cosine of A and B (IDF from
  the training segments);
- classifiers: scikit-learn LogisticRegression on the standardised features, and
  HistGradientBoostingClassifier (defaults) on the raw ones; each on all features, on the
  lengths only and on the overlap features only.

The records' masked positions are filled back with their original tokens first, so the
classifiers see the unmasked pair: an upper bound for overlap features, since the
pretrainer sees 15% of the tokens masked.

    make experiment-nsp-baseline     # or, once pretrain_tiny.py --run vocab8k_30k has made the records:
    .venv/bin/python -m bench.experiments.nsp_baseline --work data/bench/pretrain_tiny_vocab8k_30k \
        --output bench/results/nsp_baseline.json
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from bench.common import REPO, machine_info, write_report


def read_pairs(directory):
    """(segment A id lists, segment B id lists, labels 1 = NotNext) of the records in
    `directory`, in the order kbert pretrain reads them, with masked positions restored
    to their original ids."""
    from keras_bert_impl.data import NSP_FEATURE, PretrainingRecordReader

    reader = PretrainingRecordReader.from_directory(directory)  # masked records: the restore needs them
    segments_a, segments_b, labels = [], [], []
    for batch in reader.features().batch(4096).as_numpy_iterator():
        ids = batch["input_ids"].copy()
        rows = np.nonzero(batch["masked_lm_weights"] > 0)
        ids[rows[0], batch["masked_lm_positions"][rows]] = batch["masked_lm_ids"][rows]
        for row, segment, mask in zip(ids, batch["segment_ids"], batch["input_mask"]):
            length = int(mask.sum())
            a_end = int((segment[:length] == 0).sum())  # [CLS] A [SEP]
            segments_a.append(row[1 : a_end - 1].tolist())
            segments_b.append(row[a_end : length - 1].tolist())
        labels.extend(batch[NSP_FEATURE][:, 0].tolist())
    return segments_a, segments_b, np.array(labels)


def inverse_document_frequency(segments, vocab_size):
    counts = np.zeros(vocab_size)
    for segment in segments:
        counts[list(set(segment))] += 1
    return np.log((1 + len(segments)) / (1 + counts)) + 1  # scikit-learn's smoothed idf


def overlap_features(segments_a, segments_b, idf):
    """[N, 5]: len A, len B, Jaccard of the token sets, IDF share of B's tokens in A, TF-IDF cosine."""
    rows = []
    for a, b in zip(segments_a, segments_b):
        set_a, set_b = set(a), set(b)
        shared = set_a & set_b
        jaccard = len(shared) / max(len(set_a | set_b), 1)
        idf_b = sum(idf[t] for t in set_b)
        idf_share = sum(idf[t] for t in shared) / idf_b if idf_b else 0.0
        va, vb = np.bincount(a, minlength=len(idf)) * idf, np.bincount(b, minlength=len(idf)) * idf
        denominator = np.linalg.norm(va) * np.linalg.norm(vb)
        cosine = float(va @ vb / denominator) if denominator else 0.0
        rows.append([len(a), len(b), jaccard, idf_share, cosine])
    return np.array(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument(
        "--work",
        required=True,
        help="A bench/experiments/pretrain_tiny.py --work folder (pretrain/records, heldout_records).",
    )
    parser.add_argument(
        "--validation-examples",
        type=int,
        default=1600,
        help="Also score the first N held-out pairs: what kbert pretrain evaluates "
        "(--validation-steps 50 x --batch-size 32, in file order). Default 1600.",
    )
    parser.add_argument("--output", help="Write the JSON results here.")
    args = parser.parse_args(argv)
    if args.validation_examples < 1:
        parser.error(f"--validation-examples must be at least 1. Received: {args.validation_examples}")

    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train_dir = os.path.join(args.work, "pretrain", "records")
    heldout_dir = os.path.join(args.work, "heldout_records")
    for directory in (train_dir, heldout_dir):
        if not os.path.isfile(os.path.join(directory, "pretraining.json")):
            sys.exit(
                f"{directory} holds no pretraining records: run `python -m bench.experiments.pretrain_tiny "
                f"--work {args.work} --pretrain-only` (or `make experiment-nsp-baseline`) first."
            )
    with open(os.path.join(train_dir, "pretraining.json")) as f:
        vocab_size = json.load(f)["vocabulary_size"]

    machine = machine_info()
    start = time.perf_counter()
    train_a, train_b, y_train = read_pairs(train_dir)
    heldout_a, heldout_b, y_heldout = read_pairs(heldout_dir)
    idf = inverse_document_frequency(train_a + train_b, vocab_size)
    x_train = overlap_features(train_a, train_b, idf)
    x_heldout = overlap_features(heldout_a, heldout_b, idf)

    classifiers = {
        "logistic_regression": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
        "gradient_boosting": lambda: HistGradientBoostingClassifier(random_state=0),
    }
    # Which cue carries it: the segment lengths alone, the overlap alone, or both.
    feature_sets = {"all": [0, 1, 2, 3, 4], "lengths_only": [0, 1], "overlap_only": [2, 3, 4]}
    results = {}
    for features, columns in feature_sets.items():
        for name, make in classifiers.items():
            classifier = make().fit(x_train[:, columns], y_train)
            key = f"{name}/{features}"
            first = slice(0, args.validation_examples)
            results[key] = {
                "train_accuracy": float(classifier.score(x_train[:, columns], y_train)),
                "heldout_accuracy": float(classifier.score(x_heldout[:, columns], y_heldout)),
                "heldout_first_n_accuracy": float(
                    classifier.score(x_heldout[first, columns], y_heldout[first])
                ),
            }
            print(
                f"{key:34s} train {results[key]['train_accuracy']:.4f}  held out "
                f"{results[key]['heldout_accuracy']:.4f}  first {args.validation_examples} "
                f"{results[key]['heldout_first_n_accuracy']:.4f}"
            )
    majority = float(max(np.mean(y_heldout), 1 - np.mean(y_heldout)))
    print(f"{'majority class':34s} held out {majority:.4f}")

    report = {
        "train_records": os.path.relpath(train_dir, REPO),
        "heldout_records": os.path.relpath(heldout_dir, REPO),
        "train_pairs": len(y_train),
        "heldout_pairs": len(y_heldout),
        "train_notnext_fraction": float(np.mean(y_train)),
        "heldout_notnext_fraction": float(np.mean(y_heldout)),
        "features": ["len_a", "len_b", "jaccard", "idf_share_of_b_in_a", "tfidf_cosine"],
        "masked_positions": "restored to the original tokens (the classifiers see unmasked pairs)",
        "heldout_majority_class_accuracy": majority,
        "heldout_first_n": args.validation_examples,
        "classifiers": results,
        "seconds": time.perf_counter() - start,
    }
    if args.output:
        write_report(
            args.output,
            "NSP from lexical overlap only, on the records of a bench/experiments/pretrain_tiny.py run",
            report,
            machine,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
