"""`kbert search`: the nearest lines of an index folder to a query."""

import json
import sys

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command, positive_int


_HELP = "Find the lines of a `kbert index` folder nearest to a query."
_DESCRIPTION = (
    "Embed QUERY with the index's model and settings and print the k nearest lines with their cosine "
    "similarity. The model is the one the index was built with (or --model, which must be the same "
    "model: its fingerprint is checked)."
)
# (flag, add_argument keywords), in `--help`'s order.
_FLAG_TABLE = (
    ("index", dict(metavar="DIR", help="A folder written by kbert index.")),
    ("query", dict(metavar="QUERY", nargs="+", help="The query text (several: searched one by one).")),
    ("-k", dict(type=positive_int, default=10, help="How many results per query. Default 10.")),
    ("--model", dict(default=None, help="The model to embed the query with. Default: the index's own.")),
    (
        "--exact",
        dict(action="store_true", help="Search every vector, even when the index has an HNSW graph."),
    ),
    ("--json", dict(action="store_true", help="One JSON object per query.")),
)


def add_parser(subparsers):
    return add_command(subparsers, "search", run, _HELP, _DESCRIPTION, _FLAG_TABLE)


def run(args):
    from keras_bert_impl.inspection.vector_index import VectorIndex

    try:
        index = VectorIndex.load(args.index)
    except ValueError as e:
        raise UsageError(str(e)) from None
    encoder = _encoder(args, index)
    for query in args.query:
        if not query.strip():
            raise UsageError("QUERY is empty: give the text to search for.")
    vectors = encoder.encode(args.query)
    if encoder.truncated:
        print(
            f"kbert search: {encoder.truncated} query(ies) longer than {encoder.sequence_length} wordpieces "
            "were truncated.",
            file=sys.stderr,
        )
    for query, hits in zip(args.query, index.search(vectors, k=args.k, exact=args.exact)):
        if args.json:
            print(json.dumps({"query": query, "results": hits}, ensure_ascii=False))
            continue
        print(f"Query: {query}")
        for rank, hit in enumerate(hits, 1):
            print(f"{rank:3d}  {hit['score']:.4f}  {hit['text']}")
    return 0


def _encoder(args, index):
    """The index's SentenceEncoder over --model (default: the index's own model), refused when
    its vectors would not be comparable with the index's."""
    from keras_bert_impl.commands.model_files import load_backbone
    from keras_bert_impl.inspection.sentence_encoder import SentenceEncoder

    stored = index.encoder
    model = args.model or stored.get("model")
    backbone, _ = load_backbone(model, flag="--model" if args.model else "the index's model")
    encoder = SentenceEncoder(
        backbone,
        pooling=stored["pooling"],
        layers=tuple(stored["layers"]),
        normalize=stored["normalize"],
        sequence_length=stored["sequence_length"],
    )
    if encoder.fingerprint() != index.fingerprint:
        raise UsageError(
            f"{model} is not the model (or pooling) that built the index {args.index} (fingerprints "
            f"{encoder.fingerprint()[:12]} vs {index.fingerprint[:12]}): its vectors would not be "
            f"comparable. Search with the index's model ({stored.get('model')}) or rebuild the index with "
            f"kbert index --model {model}."
        )
    return encoder
