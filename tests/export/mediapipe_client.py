"""MediaPipe Tasks on exported .tflite files, for the export tests: prints JSON, imports no TensorFlow.

`mediapipe` pins a protobuf and a numpy that TensorFlow 2.20 cannot share, so this script runs
in its own venv (`make mediapipe-venv`: .venv-mediapipe, pinned in
tests/export/mediapipe_requirements.txt) and talks to the tests through files and stdout.

    .venv-mediapipe/bin/python tests/export/mediapipe_client.py --sentences S.json \\
        [--classify MODEL.tflite]... [--embed MODEL.tflite]... [--metadata MODEL.tflite]...

S.json is a JSON list of strings. Output, one JSON object on stdout:
    {"classify": {MODEL: [[score of label 0, score of label 1, ...] per sentence]},
     "labels": {MODEL: [category name of label 0, ...]},
     "embed": {MODEL: [[embedding values] per sentence]},
     "metadata": {MODEL: {"json": MediaPipe's MetadataDisplayer JSON (parsed),
                          "packed_files": [...], "min_parser_version": MediaPipe's own
                          computation for the metadata buffer}},
     "versions": {"mediapipe": ..., "numpy": ..., "protobuf": ...},
     "tensorflow_imported": false}
Scores are the TextClassifier's category scores put back in label id order; embeddings are
the TextEmbedder's float embedding with l2_normalize and quantize off (the raw model output).
"""

import argparse
import json
import sys


def classify(path, sentences):
    from mediapipe.tasks.python import text
    from mediapipe.tasks.python.core.base_options import BaseOptions

    options = text.TextClassifierOptions(base_options=BaseOptions(model_asset_path=path), max_results=-1)
    scores, names = [], {}
    with text.TextClassifier.create_from_options(options) as classifier:
        for sentence in sentences:
            categories = classifier.classify(sentence).classifications[0].categories
            row = [None] * len(categories)
            for category in categories:
                row[category.index] = float(category.score)
                names[category.index] = category.category_name
            scores.append(row)
    return scores, [names[i] for i in sorted(names)]


def embed(path, sentences):
    from mediapipe.tasks.python import text
    from mediapipe.tasks.python.core.base_options import BaseOptions

    options = text.TextEmbedderOptions(
        base_options=BaseOptions(model_asset_path=path), l2_normalize=False, quantize=False
    )
    with text.TextEmbedder.create_from_options(options) as embedder:
        return [[float(v) for v in embedder.embed(s).embeddings[0].embedding] for s in sentences]


def metadata(path):
    from mediapipe.tasks.cc.metadata.python import _pywrap_metadata_version
    from mediapipe.tasks.python.metadata import metadata as mp_metadata

    with open(path, "rb") as f:
        displayer = mp_metadata.MetadataDisplayer.with_model_buffer(f.read())
    return {
        "json": json.loads(displayer.get_metadata_json()),
        "packed_files": sorted(displayer.get_packed_associated_file_list()),
        "min_parser_version": _pywrap_metadata_version.GetMinimumMetadataParserVersion(
            bytes(displayer.get_metadata_buffer())
        ),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sentences", help="JSON file holding a list of strings (needed by --classify/--embed)"
    )
    parser.add_argument(
        "--classify", action="append", default=[], metavar="MODEL", help="run TextClassifier on MODEL"
    )
    parser.add_argument(
        "--embed", action="append", default=[], metavar="MODEL", help="run TextEmbedder on MODEL"
    )
    parser.add_argument(
        "--metadata",
        action="append",
        default=[],
        metavar="MODEL",
        help="read MODEL's metadata with MediaPipe",
    )
    args = parser.parse_args(argv)
    sentences = []
    if args.classify or args.embed:
        if not args.sentences:
            parser.error("--classify and --embed need --sentences")
        with open(args.sentences, encoding="utf-8") as f:
            sentences = json.load(f)
        if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            parser.error(f"{args.sentences} must hold a JSON list of strings")

    import google.protobuf
    import mediapipe
    import numpy

    result = {"classify": {}, "labels": {}, "embed": {}, "metadata": {}}
    for path in args.classify:
        result["classify"][path], result["labels"][path] = classify(path, sentences)
    for path in args.embed:
        result["embed"][path] = embed(path, sentences)
    for path in args.metadata:
        result["metadata"][path] = metadata(path)
    result["versions"] = {
        "mediapipe": mediapipe.__version__,
        "numpy": numpy.__version__,
        "protobuf": google.protobuf.__version__,
    }
    result["tensorflow_imported"] = "tensorflow" in sys.modules
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
