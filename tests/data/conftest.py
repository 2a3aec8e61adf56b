"""Shared fixtures for the pretraining-data tests: the real corpus, built once.

Everything is measured on the full Pang & Lee reviews
(data/corpora/polarity-en-pang&lee1.csv: 1,500 reviews, ~1.1M words, one
sentence per line inside each review), tokenized with the real uncased vocab.
"""

import os

import numpy as np
import pytest

from tests.data.helpers import REVIEWS, VOCAB, read_source


@pytest.fixture(scope="session")
def vocab_path():
    if not os.path.exists(VOCAB) or not os.path.exists(REVIEWS):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    return VOCAB


@pytest.fixture(scope="session")
def reviews(vocab_path):
    from keras_bert_impl.data import PretrainingCorpus

    return PretrainingCorpus(REVIEWS, format="reviews-csv")


@pytest.fixture(scope="session")
def review_instances(reviews, vocab_path):
    """Static examples of the full reviews with the defaults, one pass."""
    from keras_bert_impl.data import PretrainingExampleBuilder

    return list(PretrainingExampleBuilder(vocab_path, dupe_factor=1).instances(reviews))


@pytest.fixture(scope="session")
def wwm_instances(reviews, vocab_path):
    from keras_bert_impl.data import PretrainingExampleBuilder

    builder = PretrainingExampleBuilder(vocab_path, dupe_factor=1, whole_word_masking=True, seed=7)
    return list(builder.instances(reviews))


@pytest.fixture(scope="session")
def unmasked_review_features(reviews, vocab_path):
    """Unmasked padded examples of the full reviews, stacked: dict of int32 [N, 128]."""
    from keras_bert_impl.data import PretrainingExampleBuilder

    examples = list(
        PretrainingExampleBuilder(vocab_path, dupe_factor=1, mask=False, seed=3).examples(reviews)
    )
    return {k: np.array([e[k] for e in examples], np.int32) for k in examples[0]}


@pytest.fixture(scope="session")
def review_subset_file(tmp_path_factory, reviews):
    """The first 300 reviews in Google's text format (one sentence a line, a
    blank line between documents), for runs compared with Google's own code."""
    path = tmp_path_factory.mktemp("corpus") / "reviews300.txt"
    documents = []
    for document in reviews:
        documents.append(document)
        if len(documents) == 300:
            break
    path.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def source(vocab_path):
    return read_source(vocab_path)
