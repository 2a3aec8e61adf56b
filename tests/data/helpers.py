"""Test helpers for the pretraining data: paths, unmasking, statistics, and an
index of the source text to check pairs against."""

import csv
import os

import numpy as np

from tests.conftest import DATA

VOCAB = os.path.join(DATA, "minilm", "vocab.txt")
REVIEWS = os.path.join(DATA, "corpora", "polarity-en-pang&lee1.csv")
CLS, SEP, PAD, MASK = 101, 102, 0, 103  # ids in data/minilm/vocab.txt (checked in test_special_ids)


def original_ids(instance):
    """The packed ids before masking: the masked positions get their labels back."""
    ids = list(instance.token_ids)
    for position, label in zip(instance.masked_lm_positions, instance.masked_lm_ids):
        ids[position] = label
    return ids


def num_to_predict(length, prob=0.15, max_predictions=20):
    """Google's formula, spelled out independently of the masker."""
    return min(max_predictions, max(1, int(round(length * prob))))


def replacement_split(rows):
    """rows: iterable of (output_ids, positions, label_ids). Returns the fractions
    of chosen positions that became [MASK], stayed, or became another token."""
    counts = np.zeros(3)
    for output, positions, labels in rows:
        got = np.asarray(output)[np.asarray(positions, int)]
        labels = np.asarray(labels)
        is_mask = got == MASK
        same = ~is_mask & (got == labels)
        counts += [is_mask.sum(), same.sum(), (~is_mask & ~same).sum()]
    return counts / counts.sum()


def words(ids, is_continuation):
    """Position groups of whole words: a piece plus the `##` pieces that follow
    it. [CLS]/[SEP]/[PAD] belong to no word; a `##` piece right after one of
    them (a word cut by truncation) starts its own word."""
    groups = []
    previous_special = True
    for i, token in enumerate(ids):
        if token in (CLS, SEP, PAD):
            previous_special = True
            continue
        if is_continuation[token] and not previous_special:
            groups[-1].append(i)
        else:
            groups.append([i])
        previous_special = False
    return groups


def read_source(vocab_path):
    """The reviews re-read straight from the CSV (csv module, one sentence a
    line) and tokenized by BertPreprocessor, independently of keras_bert_impl.data."""
    from keras_bert_impl.tokenization import BertPreprocessor

    with open(REVIEWS, encoding="utf-8-sig", newline="") as f:
        texts = [row[1] for row in csv.reader(f) if row]
    documents = [[line.strip() for line in text.split("\n") if line.strip()] for text in texts]
    ragged = BertPreprocessor(vocab_path, sequence_length=8).tokenize([s for d in documents for s in d])
    return SourceIndex(ragged.flat_values.numpy(), ragged.row_splits.numpy(), [len(d) for d in documents])


class SourceIndex:
    """All documents' ids in one stream, with each position's document and the
    positions where a sentence starts (or a document ends)."""

    def __init__(self, flat, splits, sentences_per_document):
        self.ids = flat
        self.document = np.zeros(len(flat), int)
        self.boundary = np.zeros(len(flat) + 1, bool)  # True where a sentence starts or the stream ends
        self.boundary[splits] = True
        sentence = 0
        for d, n in enumerate(sentences_per_document):
            self.document[splits[sentence] : splits[sentence + n]] = d
            sentence += n

    def find(self, sequence, start=0, stop=None):
        """Start positions of `sequence` in ids[start:stop]."""
        sequence = np.asarray(sequence)
        stop = len(self.ids) if stop is None else stop
        window = self.ids[start:stop]
        hits = np.flatnonzero(window[: max(len(window) - len(sequence) + 1, 0)] == sequence[0])
        for k in range(1, len(sequence)):
            hits = hits[window[hits + k] == sequence[k]]
        return hits + start


class GoogleTokenizerStub:
    """The tokenizer interface Google's create_pretraining_data.py calls
    (`tokenize`, `vocab`, `convert_tokens_to_ids`), answering with our WordPiece
    output for `lines`, so a comparison with Google's code is of the pairing and
    masking algorithm alone."""

    def __init__(self, vocabulary, lines):
        import collections

        from keras_bert_impl.tokenization import BertPreprocessor

        self.vocab = collections.OrderedDict((t, i) for i, t in enumerate(vocabulary))
        lines = sorted(set(lines))
        ids = BertPreprocessor(list(vocabulary), sequence_length=8).tokenize(lines).to_list() if lines else []
        self._table = {line: [vocabulary[i] for i in row] for line, row in zip(lines, ids)}

    def tokenize(self, line):
        return self._table.get(line, [])

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab[t] for t in tokens]
