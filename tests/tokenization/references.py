"""The real sentences and the two independent tokenizers BertPreprocessor is checked against.

Sentences: Pang & Lee's movie-review data in data/corpora/ (quoted CSV, UTF-8
with a BOM, rows "label","text"). Note that data/corpora/README.txt swaps the
two descriptions: `polarity-en-pang&lee2.csv` holds the 4,000 single
sentences (sentence polarity v1.0, one sentence per row), and
`polarity-en-pang&lee1.csv` the 1,500 full reviews (polarity v2.0), whose text
is already one sentence per line. A review is split into sentences at its line
breaks; blank lines are dropped and each sentence is stripped. That gives
4,000 + 48,659 = 52,659 sentences; pairs are consecutive sentences
(0, 1), (2, 3), ... of that list.

References:
- Hugging Face `tokenizers` (Rust), `Tokenizer.from_file(data/minilm/tokenizer.json)`:
  the fast BertTokenizer of the MiniLM checkpoint whose vocab.txt we load.
- Google's original `tokenization.py` (pip bert-tensorflow 1.0.4), for the
  cases where we follow Google rather than Hugging Face. Its module defines an
  absl flag and reads it on every call, so only its class and function
  definitions are executed, with `FLAGS` a plain namespace.
"""

import csv
import functools
import os

from tests.conftest import DATA
from tests.data_readers.google_reference import google_tokenization

VOCAB = os.path.join(DATA, "minilm", "vocab.txt")
HF_TOKENIZER = os.path.join(DATA, "minilm", "tokenizer.json")
SENTENCES = os.path.join(DATA, "corpora", "polarity-en-pang&lee2.csv")
REVIEWS = os.path.join(DATA, "corpora", "polarity-en-pang&lee1.csv")
MAX_CHARS_PER_WORD = 100  # the checkpoint's tokenizer.json: WordPiece max_input_chars_per_word


def _csv_texts(path):
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))
    if not rows or any(len(row) != 2 for row in rows):
        raise ValueError(f"{path}: expected rows of two fields (label, text).")
    return [text for _, text in rows]


@functools.lru_cache(maxsize=1)
def real_sentences():
    """The 52,659 sentences, the 4,000 MR sentences first, then the review sentences in file order."""
    sentences = [text.strip() for text in _csv_texts(SENTENCES)]
    for review in _csv_texts(REVIEWS):
        sentences.extend(line.strip() for line in review.split("\n") if line.strip())
    return sentences


def corpus(name):
    """ "all": the 52,659 sentences; "mr": the first 4,000 (the MR sentences), for the quick loop."""
    sentences = real_sentences()
    return {"all": sentences, "mr": sentences[:4000]}[name]


def pairs_of(sentences):
    """Consecutive sentences (0, 1), (2, 3), ... as two lists."""
    return sentences[0:-1:2], sentences[1::2]


@functools.lru_cache(maxsize=1)
def _hf_tokenizer_file():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(HF_TOKENIZER)


def fresh_hf_tokenizer(sequence_length=None):
    """A new HF tokenizer: no truncation/padding, or both at `sequence_length` (longest_first, right,
    [PAD])."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(_hf_tokenizer_file().to_str())
    if sequence_length is None:
        tokenizer.no_truncation()
        tokenizer.no_padding()
    else:
        tokenizer.enable_truncation(sequence_length, strategy="longest_first")
        tokenizer.enable_padding(length=sequence_length, pad_id=0, pad_type_id=0, pad_token="[PAD]")
    return tokenizer


@functools.lru_cache(maxsize=None)
def hf_tokenizer(sequence_length=None):
    """A shared `fresh_hf_tokenizer(sequence_length)`: do not reconfigure it."""
    return fresh_hf_tokenizer(sequence_length)


def hf_pieces(texts):
    """Word-piece ids of each text, without special tokens, untruncated."""
    return [e.ids for e in hf_tokenizer().encode_batch(list(texts), add_special_tokens=False)]


@functools.lru_cache(maxsize=1)
def google_tokenizer():
    """Google's FullTokenizer (uncased), its WordPiece limit set to the checkpoint's 100 characters."""
    tokenization = google_tokenization()
    tokenizer = tokenization.FullTokenizer(vocab_file=VOCAB, do_lower_case=True)
    tokenizer.wordpiece_tokenizer.max_input_chars_per_word = MAX_CHARS_PER_WORD
    return tokenizer


def google_pieces(text):
    tokenizer = google_tokenizer()
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))


def google_truncate_pair(a, b, budget):
    """Google's run_classifier._truncate_seq_pair, on lists (copies)."""
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b


def pack(a, b, sequence_length, cls_id=101, sep_id=102, pad_id=0):
    """[CLS] a [SEP] (b [SEP]) padded: (token_ids, segment_ids, padding_mask) lists."""
    ids = [cls_id] + list(a) + [sep_id]
    segments = [0] * len(ids)
    if b is not None:
        ids += list(b) + [sep_id]
        segments += [1] * (len(b) + 1)
    mask = [1] * len(ids)
    pad = sequence_length - len(ids)
    return ids + [pad_id] * pad, segments + [0] * pad, mask + [0] * pad
