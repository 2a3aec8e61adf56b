"""`kbert index`: a searchable folder of a text file's sentence vectors."""

import os
import sys
import time

from keras_bert_impl.commands.encoder_flags import add_encoder_flags, encoder_from_args, progress_bar, report_truncated
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.output_files import add_overwrite_flag, refuse_existing, refuse_replacing_inputs
from keras_bert_impl.commands.text_lines import check_text_file, read_lines


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "index",
        help="Build a semantic-search index of a text file's lines.",
        description="Embed every non-blank line of FILE (normalised vectors, so scores are cosine similarities) and "
        "write an index folder that `kbert search` queries. Up to 20,000 lines are searched exactly; above that the "
        "folder also holds a faiss HNSW graph, searched approximately (--method to choose). The folder records the "
        "model's fingerprint: a query embedded by another model is refused.",
    )
    parser.add_argument("file", metavar="FILE", help="UTF-8 text, one sentence per line (blank lines are skipped and counted).")
    parser.add_argument("--output", required=True, help="The index folder to write (atomically; an existing index is replaced "
                        "only with --overwrite).")
    add_overwrite_flag(parser, "an existing index folder")
    parser.add_argument("--method", default="auto", choices=("auto", "exact", "hnsw"),
                        help="exact: numpy over every vector; hnsw: faiss' HNSW graph; auto (default): hnsw above 20,000 lines.")
    add_encoder_flags(parser, normalize_flag=False)
    parser.set_defaults(func=run)
    return parser


def run(args):
    if os.path.exists(args.output) and not os.path.isfile(os.path.join(args.output, "manifest.json")):
        raise UsageError(
            f"--output {args.output!r} exists and is not an index folder: choose a new path (nothing there is replaced)."
        )
    refuse_existing(args, "output")
    refuse_replacing_inputs("--output", args.output, {"FILE": args.file, "--model": getattr(args, "model", None)})
    total = check_text_file(args.file, "FILE")
    texts = [text for text in read_lines(args.file, "FILE") if text.strip()]
    if not texts:
        raise UsageError(f"FILE {args.file!r} has only blank lines: give a file with one sentence per line.")
    encoder, description = encoder_from_args(args, normalize=True)
    print(f"Indexing {len(texts)} lines of {args.file} with {description}", file=sys.stderr)
    import numpy as np

    from keras_bert_impl.inspection.vector_index import VectorIndex

    start = time.perf_counter()
    vectors = np.concatenate(list(encoder.encode_stream(texts, progress=progress_bar(len(texts), "index"))))
    embedded = time.perf_counter()
    config = dict(encoder.config(), model=os.path.abspath(args.model))
    index = VectorIndex(vectors, texts, encoder.fingerprint(), config, method=args.method)
    index.save(args.output)
    built = time.perf_counter()
    report_truncated(encoder, len(texts), "index")
    skipped = total - len(texts)
    print(f"Wrote {index.method} index of {len(texts)} lines to {args.output} (embedding {embedded - start:.1f} s, "
          f"index {built - embedded:.1f} s){f'; skipped {skipped} blank lines' if skipped else ''}")
    return 0
