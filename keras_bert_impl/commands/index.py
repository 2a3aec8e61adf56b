"""`kbert index`: a searchable folder of a text file's sentence vectors."""

import io
import itertools
import os
import sys
import time

from keras_bert_impl import file_paths
from keras_bert_impl.commands.encoder_flags import (
    add_encoder_flags,
    encoder_from_args,
    progress_bar,
    report_truncated,
)
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command
from keras_bert_impl.commands.output_files import add_overwrite_flag, refuse_existing, refuse_replacing_inputs
from keras_bert_impl.commands.text_lines import non_blank_texts, read_lines


_HELP = "Build a semantic-search index of a text file's lines."
_DESCRIPTION = (
    "Embed every non-blank line of FILE (normalised vectors, so scores are cosine "
    "similarities) and write an index folder that `kbert search` queries. Up to 20,000 lines are "
    "searched exactly; above that the folder also holds a faiss HNSW graph, searched approximately "
    "(--method to choose). The folder records the model's fingerprint: a query embedded by another "
    "model is refused."
)


def add_parser(subparsers):
    parser = add_command(subparsers, "index", run, _HELP, _DESCRIPTION)
    parser.add_argument(
        "file",
        metavar="FILE",
        help="UTF-8 text, one sentence per line (blank lines are skipped and counted); "
        "or the --output folder of `kbert embed --runner ...`, whose vector shards are indexed without "
        "embedding again (give the same --model, --pooling, --layer and --seq-len).",
    )
    parser.add_argument(
        "--output",
        required=True,
        help="The index folder to write (atomically; an existing index is replaced only with --overwrite).",
    )
    add_overwrite_flag(parser, "an existing index folder")
    parser.add_argument(
        "--method",
        default="auto",
        choices=("auto", "exact", "hnsw"),
        help="exact: numpy over every vector; hnsw: faiss' HNSW graph; auto (default): hnsw above 20,000 "
        "lines.",
    )
    add_encoder_flags(parser, normalize_flag=False)
    return parser


def run(args):
    if file_paths.is_remote(args.output):
        raise UsageError(
            f"--output {args.output!r} is a cloud path: `kbert index` writes a local folder, which "
            "`kbert search` reads. Write it here, then copy it where it belongs."
        )
    if os.path.exists(args.output) and not os.path.isfile(os.path.join(args.output, "manifest.json")):
        raise UsageError(
            f"--output {args.output!r} exists and is not an index folder: choose a new path (nothing there "
            "is replaced)."
        )
    refuse_existing(args, "output")
    refuse_replacing_inputs(
        "--output", args.output, {"FILE": args.file, "--model": getattr(args, "model", None)}
    )
    from keras_bert_impl.inspection.vector_index import VectorIndex

    encoder, start, total, texts, vectors = _vectors(args)
    embedded = time.perf_counter()
    config = dict(encoder.config(), model=file_paths.absolute(args.model))
    index = VectorIndex(vectors, texts, encoder.fingerprint(), config, method=args.method)
    index.save(args.output)
    built = time.perf_counter()
    report_truncated(encoder, len(texts), "index")
    skipped = total - len(texts)
    print(
        f"Wrote {index.method} index of {len(texts)} lines to {args.output} (embedding "
        f"{embedded - start:.1f} s, index {built - embedded:.1f} s)"
        f"{f'; skipped {skipped} blank lines' if skipped else ''}"
    )
    return 0


def _vectors(args):
    """(encoder, when embedding started (the model loaded), lines of FILE, its non-blank texts,
    their vectors): FILE's lines embedded, or a `kbert embed --runner` folder's vectors."""
    import numpy as np

    local_model = file_paths.with_local_model(args)  # FILE is read where it is
    if file_paths.is_folder(args.file):
        encoder, _ = encoder_from_args(local_model, normalize=True)
        return (encoder, time.perf_counter(), *_embedding_shards(args, encoder))
    texts, blank = non_blank_texts(args.file, "FILE")
    total = len(texts) + blank
    encoder, description = encoder_from_args(local_model, normalize=True)
    print(f"Indexing {len(texts)} lines of {args.file} with {description}", file=sys.stderr)
    start = time.perf_counter()
    vectors = np.concatenate(list(encoder.encode_stream(texts, progress=progress_bar(len(texts), "index"))))
    return encoder, start, total, texts, vectors


# The flags that decide a vector: a shard folder embedded with others would index wrong vectors.
_VECTOR_FLAGS = ("pooling", "layer", "seq_len")


def _embedding_shards(args, encoder):
    """(lines, non-blank texts, their vectors) of a `kbert embed --runner` folder, checked to be
    complete and made with this --model and these flags."""
    import numpy as np

    manifest = _checked_manifest(args)
    texts, vectors = [], []
    for shard in manifest["shards"]:
        block = np.load(io.BytesIO(file_paths.read_bytes(file_paths.join(args.file, shard["file"]))))
        lines = itertools.islice(
            read_lines(shard["input"], "FILE"),
            shard["first_line"] - 1,
            shard["first_line"] - 1 + shard["lines"],
        )
        keep = []  # blank lines have a vector in the shard (as in `kbert embed`) but no place in an index
        for i, text in enumerate(lines):
            if text.strip():
                keep.append(i)
                texts.append(text)
        if block.shape != (shard["lines"], encoder.dim):
            raise UsageError(
                f"FILE {args.file!r}: {shard['file']} holds {block.shape} vectors where "
                f"{(shard['lines'], encoder.dim)} belong. Embed again."
            )
        vectors.append(block[keep])
    if not texts:
        raise UsageError(f"FILE {args.file!r}: its inputs have only blank lines.")
    print(f"Indexing {len(texts)} vectors of {args.file} ({len(manifest['shards'])} shards)", file=sys.stderr)
    return manifest["lines"], texts, np.concatenate(vectors)


def _checked_manifest(args):
    """The manifest of FILE's `kbert embed --runner` folder, refused unless this --model and these
    flags made its vectors."""
    from keras_bert_impl.pipelines import read_manifest

    try:
        manifest = read_manifest(args.file)
    except (OSError, ValueError):
        raise UsageError(
            f"FILE {args.file!r} is a folder without the manifest.json of `kbert embed --runner`: give "
            "a text file, or that command's --output folder."
        ) from None
    settings = manifest.get("settings", {})
    differing = [
        f"--{k.replace('_', '-')} {settings.get(k)!r} there, {getattr(args, k)!r} here"
        for k in _VECTOR_FLAGS
        if settings.get(k) != getattr(args, k)
    ]
    if (
        manifest.get("kind") != "embeddings"
        or differing
        or file_paths.absolute(settings.get("model", "")) != file_paths.absolute(args.model)
    ):
        raise UsageError(
            f"FILE {args.file!r} holds {manifest.get('kind')} of --model {settings.get('model')!r}"
            f"{': ' + '; '.join(differing) if differing else ''}. Index it with the flags it was embedded "
            "with, or embed again."
        )
    return manifest
