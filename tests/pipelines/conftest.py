"""Real inputs of the Beam pipeline tests: the Pang & Lee reviews as text shards."""

import os

import pytest

from tests.conftest import DATA

VOCAB = os.path.join(DATA, "minilm", "vocab.txt")
REVIEWS = os.path.join(DATA, "corpora", "polarity-en-pang&lee1.csv")


def review_documents(count):
    from keras_bert_impl.data import PretrainingCorpus

    documents = []
    for document in PretrainingCorpus(REVIEWS, format="reviews-csv"):
        documents.append(document)
        if len(documents) == count:
            return documents
    raise AssertionError(f"{REVIEWS} has fewer than {count} reviews")


def write_text_shards(folder, documents, files):
    """`documents` in Google's text format over `files` files (shard-00000.txt, ...)."""
    from keras_bert_impl.data import documents_to_text

    folder.mkdir(parents=True, exist_ok=True)
    per_file = -(-len(documents) // files)
    for index in range(files):
        part = documents[index * per_file : (index + 1) * per_file]
        (folder / f"shard-{index:05d}.txt").write_text(documents_to_text(part), encoding="utf-8")
    return str(folder / "shard-*.txt")


@pytest.fixture(scope="session")
def vocab_path():
    if not os.path.exists(VOCAB) or not os.path.exists(REVIEWS):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    return VOCAB
