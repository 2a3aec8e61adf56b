"""`kbert plot-embeddings`: a 2-D PCA picture of vectors from `kbert embed`, coloured by label."""

import json
import os

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command
from keras_bert_impl.commands.text_lines import check_text_file, read_lines
from keras_bert_impl.commands.output_files import overwrite_flag, refuse_existing


_HELP = "Plot vectors from kbert embed on their first two principal components, coloured by label."
_DESCRIPTION = (
    "Read VECTORS (.npy or .jsonl from kbert embed) and --labels (one label per line, the same number "
    "of lines as the embedded file), project on the first two principal components and write a PNG "
    "scatter."
)
# (flag, add_argument keywords), in `--help`'s order.
_FLAG_TABLE = (
    ("vectors", dict(metavar="VECTORS", help="vectors.npy or vectors.jsonl from kbert embed.")),
    ("--labels", dict(required=True, help="A text file with one label per line (at most 20 distinct).")),
    ("--output", dict(required=True, help="PNG to write.")),
    overwrite_flag(),
    ("--title", dict(default="Sentence vectors (PCA)", help="The picture's title.")),
)


def add_parser(subparsers):
    return add_command(subparsers, "plot-embeddings", run, _HELP, _DESCRIPTION, _FLAG_TABLE)


def _read_vectors(path):
    import numpy as np

    if not os.path.isfile(path):
        raise UsageError(f"VECTORS {path!r}: no such file.")
    try:
        if path.endswith(".npy"):
            vectors = np.load(path)
        elif path.endswith(".jsonl"):
            with open(path, encoding="utf-8") as f:
                vectors = np.array([json.loads(line)["vector"] for line in f if line.strip()], np.float32)
        else:
            raise UsageError(f"VECTORS must be a .npy or .jsonl file from kbert embed. Received: {path!r}")
    except (ValueError, KeyError, TypeError, EOFError, UnicodeDecodeError) as e:
        raise UsageError(
            f"VECTORS {path!r} is not a vectors file from kbert embed ({type(e).__name__}: {str(e)[:120]})."
        ) from None
    if vectors.ndim != 2 or len(vectors) < 2:
        raise UsageError(
            f"VECTORS {path!r} must hold at least 2 vectors as [N, D]. Received shape {vectors.shape}."
        )
    return vectors


def run(args):
    if not args.output.lower().endswith(".png"):
        raise UsageError(f"--output must end in .png. Received: {args.output!r}")
    refuse_existing(args, "output")
    vectors = _read_vectors(args.vectors)
    check_text_file(args.labels, "--labels")
    labels = [line.strip() for line in read_lines(args.labels, "--labels")]
    if len(labels) != len(vectors):
        raise UsageError(
            f"--labels {args.labels} has {len(labels)} lines but VECTORS has {len(vectors)} vectors: give "
            "one label per embedded line, in the same order."
        )
    from keras_bert_impl.inspection.embedding_plot import plot_embeddings

    try:
        counts = plot_embeddings(vectors, labels, args.output, title=args.title)
    except ValueError as e:
        raise UsageError(f"--labels: {e}") from None
    print(
        f"Wrote {args.output} ({len(vectors)} points; labels: "
        f"{', '.join(f'{k} {v}' for k, v in counts.items())})"
    )
    return 0
