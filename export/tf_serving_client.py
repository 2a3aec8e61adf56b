"""A TF Serving REST client for a `kbert export`ed classifier: the same file runs against
`kbert serve` on your machine and against TF Serving in production.

    python export/tf_serving_client.py --url http://127.0.0.1:8501 --model mr "a gripping film" "dull"

It reads the model's signature from `/v1/models/NAME/metadata`, sends the texts in TF
Serving's row format (pairs as `TEXT_A|||TEXT_B` for a pair classifier), and prints one line
per text: the top label, its probability and the text. Python's standard library only.
"""

import argparse
import json
import sys
import urllib.error
import urllib.request


def _call(url, body=None):
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        error = json.load(e).get("error", "")
        raise SystemExit(f"{url}: HTTP {e.code}: {error}") from None


def classify(url, model, texts, signature="serving_default"):
    """[(top_label, top_score)] for `texts` (strings, or (a, b) pairs for a pair model)."""
    base = f"{url.rstrip('/')}/v1/models/{model}"
    metadata = _call(f"{base}/metadata")
    inputs = sorted(metadata["metadata"]["signature_def"]["signature_def"][signature]["inputs"])
    if len(inputs) == 1:
        instances = list(texts)
    else:  # text and text_b
        instances = [dict(zip(inputs, pair)) for pair in texts]
    predictions = _call(f"{base}:predict", {"signature_name": signature, "instances": instances})[
        "predictions"
    ]
    return [(p["top_label"], p["top_score"]) for p in predictions]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument(
        "--url", default="http://127.0.0.1:8501", help="The server. Default TF Serving's REST port."
    )
    parser.add_argument("--model", required=True, help="The model name (kbert export --name).")
    parser.add_argument("texts", nargs="+", help="Texts to classify; TEXT_A|||TEXT_B for a pair model.")
    args = parser.parse_args(argv)
    texts = [tuple(t.split("|||", 1)) if "|||" in t else t for t in args.texts]
    for text, (label, score) in zip(args.texts, classify(args.url, args.model, texts)):
        print(f"{label}\t{score:.4f}\t{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
