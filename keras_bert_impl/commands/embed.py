"""`kbert embed`: a vector per line of a text file, streamed to .npy or .jsonl."""

import json
import os
import sys

from keras_bert_impl import file_paths
from keras_bert_impl.commands import beam_inference
from keras_bert_impl.commands.encoder_flags import (
    add_encoder_flags,
    encoder_from_args,
    progress_bar,
    report_truncated,
)
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command
from keras_bert_impl.commands.text_lines import check_text_file, read_lines
from keras_bert_impl.commands.output_files import add_overwrite_flag, refuse_existing
from keras_bert_impl.commands.runner_flags import LOCAL, add_runner_flags, check_runner_flags
from keras_bert_impl.commands.precision_flag import add_precision_flag

FORMATS = (".npy", ".jsonl")


_HELP = "Embed every line of a text file (sentence vectors, bert-as-service's pooling choices)."
_DESCRIPTION = (
    "Write one vector per line of FILE, in order (a blank line gets the vector of an empty "
    'text, so row i is always line i + 1): .npy (float32 [lines, dim]) or .jsonl ({"line", "text", '
    '"vector"} per line). Texts are batched by length, and the file streams through in chunks, so '
    "memory does not grow with it. all-MiniLM-L6-v2's published recipe is --pooling mean --normalize."
)


def add_parser(subparsers):
    parser = add_command(subparsers, "embed", run, _HELP, _DESCRIPTION)
    parser.add_argument("file", metavar="FILE", help="UTF-8 text, one text per line.")
    parser.add_argument("--output", required=True, help="vectors.npy or vectors.jsonl (written atomically).")
    add_overwrite_flag(parser)
    add_encoder_flags(parser)
    add_runner_flags(parser, shards=True)
    add_precision_flag(parser)
    return parser


def run(args):
    if args.runner != LOCAL:
        return beam_inference.run_embed(args)
    check_runner_flags(args)
    if file_paths.is_remote(args.output):
        raise UsageError(
            f"--output {args.output!r} is a cloud path: without --runner `kbert embed` writes a local "
            "file. Write it here, or add --runner direct (its output folder may be in a bucket)."
        )
    if not args.output.endswith(FORMATS):
        raise UsageError(f"--output must end in .npy or .jsonl. Received: {args.output!r}")
    if os.path.isdir(args.output):
        raise UsageError(f"--output {args.output!r} is a folder: give a file name ending in .npy or .jsonl.")
    refuse_existing(args, "output")
    total = check_text_file(args.file, "FILE")
    encoder, description = encoder_from_args(file_paths.with_local_model(args))  # FILE is read where it is
    print(
        f"Embedding {total} lines of {args.file} with {description} ({args.pooling} pooling, layers "
        f"{args.layer}, {encoder.dim} dimensions)",
        file=sys.stderr,
    )
    texts = read_lines(args.file, "FILE")
    chunks = encoder.encode_stream(texts, progress=progress_bar(total, "embed"))
    from keras_bert_impl.atomic_write import write_atomically

    if args.output.endswith(".npy"):
        write_atomically(args.output, lambda tmp: _write_npy(tmp, chunks, total, encoder.dim), suffix=".npy")
    else:
        lines = read_lines(args.file, "FILE")
        write_atomically(args.output, lambda tmp: _write_jsonl(tmp, chunks, lines), suffix=".jsonl")
    report_truncated(encoder, total, "embed")
    print(f"Wrote {total} vectors of {encoder.dim} dimensions to {args.output}")
    return 0


def _write_npy(path, chunks, total, dim):
    import numpy as np

    # A memory-mapped .npy: rows land on disk as they come, and the header is right from the start.
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(total, dim))
    done = 0
    for vectors in chunks:
        out[done : done + len(vectors)] = vectors
        done += len(vectors)
    if done != total:
        raise UsageError(f"FILE changed while it was read: {done} lines instead of {total}.")
    out.flush()
    del out


def _write_jsonl(path, chunks, lines):
    with open(path, "w", encoding="utf-8") as f:
        number = 0
        for vectors in chunks:
            for vector in vectors:
                number += 1
                text = next(lines)
                f.write(
                    json.dumps({"line": number, "text": text, "vector": vector.tolist()}, ensure_ascii=False)
                    + "\n"
                )
