"""BERT WordPiece tokenization and packing in plain Python: BertPreprocessor's ids without
TensorFlow.

The same algorithm as android_demo's WordPieceTokenizer.java and web_demo's bert_tokenizer.js,
on the same character table (char_table.py): clean and (uncased) fold each character by the
table, split words on its separators and around its split-off characters, then greedy
longest-match-first WordPiece (`##` continuations); a word of more than `max_chars_per_word`
characters, or with no WordPiece cover, is one [UNK]. Pairs are truncated like Google's
`_truncate_seq_pair`. tests/lite/ hold it id for id to BertPreprocessor on every hard case of
tests/fixtures/tokenization_hard_cases.json, on real sentences and on a sample of every
Unicode plane.

Shape legend: N texts, S sequence length.
"""

import numpy as np

from keras_bert_lite.char_table import REMOVED, SPACE, SPLIT, CharTable

DEFAULT_MAX_CHARS_PER_WORD = 100
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
_UTF8_ERROR = (
    "is not valid Unicode text (it holds a lone surrogate, e.g. bytes decoded with "
    "errors='surrogateescape'): decode the source with its real encoding"
)


class WordPieceTokenizer:
    """Raw text -> BERT's word-piece ids, and packed [CLS] a [SEP] (b [SEP]) rows.

    Args:
        vocabulary: list of str, the word pieces in id order (vocab.txt's lines), holding
            [PAD], [UNK], [CLS] and [SEP]; the first occurrence of a repeated piece wins, as in
            tensorflow-text's lookup.
        lowercase: bool. Whether the vocabulary is uncased (fold characters by the table).
        table: a `CharTable` (default: this package's bert_unicode.txt).
        max_chars_per_word: int. Longer words become one [UNK].

    Example:
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "fine", "film", "##s", "!"]
    >>> tokenizer = WordPieceTokenizer(vocabulary, lowercase=True)
    >>> tokenizer.tokenize("A fine FILMS!")
    [4, 5, 6, 7, 8]
    >>> tokenizer.encode(["a film", "fine films!"])["padding_mask"]
    array([[1, 1, 1, 1, 0, 0],
           [1, 1, 1, 1, 1, 1]], dtype=int32)
    """

    def __init__(self, vocabulary, lowercase, table=None, max_chars_per_word=DEFAULT_MAX_CHARS_PER_WORD):
        self.ids = {}
        for index, piece in enumerate(vocabulary):
            self.ids.setdefault(piece, index)
        missing = [name for name in SPECIAL_TOKENS if name not in self.ids]
        if missing:
            raise ValueError(
                f"The vocabulary has no {', '.join(missing)} token: is this a BERT vocab.txt? "
                f"Received {len(vocabulary)} pieces starting {list(vocabulary[:5])}."
            )
        if not isinstance(lowercase, bool):
            raise ValueError(f"lowercase must be True or False. Received: lowercase={lowercase!r}")
        if not isinstance(max_chars_per_word, int) or max_chars_per_word < 1:
            raise ValueError(
                "max_chars_per_word must be a positive int. Received: "
                f"max_chars_per_word={max_chars_per_word!r}"
            )
        self.pad_id, self.unk_id, self.cls_id, self.sep_id = (self.ids[name] for name in SPECIAL_TOKENS)
        self.lowercase = lowercase
        self.max_chars_per_word = max_chars_per_word
        table = CharTable() if table is None else table
        self._kinds = table.kinds
        self._folds = table.folds if lowercase else {}

    def tokenize(self, text, max_pieces=None):
        """text (str) -> its word-piece ids, the first `max_pieces` of them (tokenizing stops
        there: a long text costs only what is kept)."""
        if not isinstance(text, str):
            raise ValueError(f"WordPieceTokenizer takes str. Received: {type(text).__name__} {text!r:.80}")
        limit = float("inf") if max_pieces is None else max_pieces
        kinds, folds, out, word = self._kinds, self._folds, [], []
        for char in text:
            if len(out) >= limit:
                break
            kind = kinds[ord(char)]
            if kind != REMOVED:
                # A separator is never folded; other characters may fold to several (or none).
                for c in char if kind == SPACE else folds.get(ord(char), char):
                    word = self._accept(c, word, out, text)
        if word:
            self._word_pieces(word, out)
        return out if max_pieces is None else out[:max_pieces]

    def _accept(self, c, word, out, text):
        """One cleaned character into the word being read (-> the word now being read)."""
        kind = self._kinds[ord(c)]
        if kind == SPACE or kind == SPLIT:
            if word:
                self._word_pieces(word, out)
            if kind == SPLIT:
                self._word_pieces([c], out)
            return []
        if 0xD800 <= ord(c) <= 0xDFFF:
            raise ValueError(f"The text {text[:60]!r} {_UTF8_ERROR}.")
        word.append(c)
        return word

    def _word_pieces(self, chars, out):
        if len(chars) > self.max_chars_per_word:
            out.append(self.unk_id)
            return
        ids, mark, start, n = self.ids, len(out), 0, len(chars)
        while start < n:
            end, found = n, None
            while start < end:
                piece = "".join(chars[start:end])
                found = ids.get("##" + piece if start else piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                del out[mark:]
                out.append(self.unk_id)
                return
            out.append(found)
            start = end

    def pack(self, text, text_b=None, sequence_length=None):
        """One row's ids: [CLS] text [SEP] (text_b [SEP]), truncated to `sequence_length` ids
        (Google's `_truncate_seq_pair` for pairs) and not padded. -> (token_ids, segment_ids),
        lists of int."""
        if text_b is None:
            budget = None if sequence_length is None else sequence_length - 2
            pieces = self.tokenize(text, budget)
            return [self.cls_id, *pieces, self.sep_id], [0] * (len(pieces) + 2)
        budget = None if sequence_length is None else sequence_length - 3
        a = self.tokenize(text, None if budget is None else budget + 1)
        b = self.tokenize(text_b, None if budget is None else budget + 1)
        if budget is not None:
            keep_a = min(len(a), max(budget - len(b), (budget + 1) // 2))
            a, b = a[:keep_a], b[: min(len(b), budget - keep_a)]
        return [self.cls_id, *a, self.sep_id, *b, self.sep_id], [0] * (len(a) + 2) + [1] * (len(b) + 1)

    def encode(self, texts, texts_b=None, sequence_length=None):
        """texts (list of str; `texts_b` the second texts of pairs) -> {"token_ids",
        "segment_ids", "padding_mask": int32 [N, S]}, S = `sequence_length` (the rows padded to
        it), or the longest row when it is None."""
        if texts_b is not None and len(texts_b) != len(texts):
            raise ValueError(
                f"texts_b must have one entry per text. Received {len(texts)} texts and {len(texts_b)}."
            )
        minimum = 3 if texts_b is None else 4
        if sequence_length is not None and (
            not isinstance(sequence_length, int) or sequence_length < minimum
        ):
            raise ValueError(
                f"sequence_length must be an int >= {minimum} ([CLS], a piece, [SEP]"
                f"{', a piece, [SEP]' if minimum == 4 else ''}). "
                f"Received: sequence_length={sequence_length!r}"
            )
        rows = [
            self.pack(t, None if texts_b is None else texts_b[i], sequence_length)
            for i, t in enumerate(texts)
        ]
        return self.pad(rows, sequence_length or max((len(ids) for ids, _ in rows), default=2))

    def pad(self, rows, width):
        """`pack`'s rows [(token_ids, segment_ids)] -> {"token_ids", "segment_ids",
        "padding_mask": int32 [N, width]}, each row padded to `width`."""
        token_ids = np.full((len(rows), width), self.pad_id, np.int32)  # [N, width]
        segment_ids = np.zeros((len(rows), width), np.int32)
        padding_mask = np.zeros((len(rows), width), np.int32)
        for i, (ids, segments) in enumerate(rows):
            token_ids[i, : len(ids)] = ids
            segment_ids[i, : len(ids)] = segments
            padding_mask[i, : len(ids)] = 1
        return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
