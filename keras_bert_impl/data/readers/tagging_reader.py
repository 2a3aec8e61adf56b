"""Word-level tagging files (CoNLL columns, or word/TAG lines) -> tf.data batches aligned to wordpieces.

Shape legend: B batch, S sequence length.
"""

import re

import numpy as np
import tensorflow as tf

from keras_bert_impl.data.readers import _common
from keras_bert_impl.data.readers.label_vocabulary import LabelVocabulary
from keras_bert_impl.data.readers.read_report import ReadReport, logger
from keras_bert_impl.tokenization.vocabulary import special_token_ids
from keras_bert_impl.validation import check_int, check_positive_int

FORMATS = ("conll", "word/tag")


class TaggingReader:
    """Reads part-of-speech / named-entity files for `BertTokenClassifier`.

    Formats:
    - "conll": one word per line, columns split on whitespace, the word in
      the first column and its tag in `tag_column` (default: the last, so
      both `EU B-ORG` and CoNLL-2003's `EU NNP B-NP B-ORG` work); a blank
      line ends a sentence; `-DOCSTART-` lines (document boundaries) are not
      words and are passed over.
    - "word/tag": one sequence per line of space-separated `word/TAG` items,
      split at the last slash (the Penn Treebank sample
      `data/corpora/tagged-en-wsj.txt`: `Pierre/NNP Vinken/NNP ,/, ...`).

    Each word is tokenized on its own (as BERT taggers do), and its tag goes
    to its first wordpiece; the other pieces, [CLS], [SEP] and padding get
    `ignore_label` and sample weight 0, so the loss and metrics see exactly
    one prediction per word. Sentences longer than `sequence_length - 2`
    wordpieces are cut; `reader.report.counters` counts the truncated
    sequences and the words lost (`truncated_sequences`, `truncated_words`).
    The tag vocabulary is built (sorted) from the first file read unless
    `labels` is given; a tag it lacks in a later file is a malformed row.

    The dataset yields (x, y, sample_weight): y int32 [B, S] tag ids,
    sample_weight float32 [B, S] (1 on each word's first piece), ready for
    `model.fit` with `SparseCategoricalCrossentropy`.

    Args:
        preprocessor: a `BertPreprocessor` with a vocabulary; an int
            `sequence_length` pads every row to it, None pads each batch to
            its longest row.
        file_format: "conll" or "word/tag".
        tag_column: int. "conll": the column holding the tag (-1 = last).
        labels: `LabelVocabulary` or list of tags: a fixed tag vocabulary.
        ignore_label: int. The y value where the weight is 0. The default 0
            is a valid class id, so losses that cannot ignore a value (Keras'
            sparse cross-entropy with a TensorFlow gather) never see an out of
            range id; pass -100 for losses built with `ignore_class=-100`.
        batch_size: int.
        shuffle: bool. Shuffle the sentences each epoch (training).
        seed: int or None.
        on_error: "raise" or "skip" (count and log) for malformed sentences: a
            line without a tag, an unknown tag, a word with no wordpieces.

    Example:
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> pre = BertPreprocessor("data/minilm/vocab.txt", sequence_length=128)
    >>> reader = TaggingReader(pre, file_format="word/tag")
    >>> train = reader.read("data/corpora/tagged-en-wsj.txt")
    >>> len(reader.labels), reader.report.examples, reader.report.counters["truncated_sequences"]
    (44, 1001, 0)
    >>> x, y, sample_weight = next(iter(train))  # [CLS] pierre vin ##ken , 61: tags NNP (19), "," (4), CD (8)
    >>> y[0, :6].numpy(), sample_weight[0, :6].numpy()
    (array([ 0, 19, 19,  0,  4,  8], dtype=int32), array([0., 1., 1., 0., 1., 1.], dtype=float32))
    """

    def __init__(
        self,
        preprocessor,
        file_format="conll",
        tag_column=-1,
        labels=None,
        ignore_label=0,
        batch_size=32,
        shuffle=False,
        seed=None,
        on_error="raise",
    ):
        vocabulary, _, sequence_length = _common.preprocessor_settings(preprocessor)
        if file_format not in FORMATS:
            raise ValueError(
                f"file_format must be one of {list(FORMATS)}. Received: file_format={file_format!r}"
            )
        if isinstance(tag_column, bool) or not isinstance(tag_column, int) or tag_column == 0:
            raise ValueError(
                "tag_column must be a non-zero int (column 0 holds the word; -1 is the last). "
                f"Received: tag_column={tag_column!r}"
            )
        if labels is not None and not isinstance(labels, LabelVocabulary):
            labels = LabelVocabulary(labels)
        check_int("ignore_label", ignore_label)
        _common.set_reading(self, preprocessor, batch_size, shuffle, seed, on_error)
        self.file_format = file_format
        self.tag_column = tag_column
        self.labels = labels
        self.ignore_label = ignore_label
        self.sequence_length = sequence_length
        self._pad_id, self._cls_id, self._sep_id = special_token_ids(vocabulary, "[PAD]", "[CLS]", "[SEP]")
        self.report = None

    @property
    def num_classes(self):
        return len(self.labels) if self.labels is not None else None

    def read(self, path, build_labels=None, max_sentences=None, epochs=None):
        """Reads one file into a `tf.data.Dataset` of (x, y, sample_weight) batches.

        Args:
            path: the tagged file.
            build_labels: bool or None. Build the tag vocabulary from this
                file; None builds it when there is none yet.
            max_sentences: int or None. Read only the first sentences.
            epochs: int or None. As for `ClassificationReader.read`: None one
                pass, an int that many passes ordered by (seed, pass) alone.
        """
        check_positive_int("max_sentences", max_sentences, allow_none=True)
        _common.check_epochs(epochs)
        path = _common.check_file(path)
        report = ReadReport(path, self.on_error)
        self.report = report
        sentences = []
        for sentence in self.sentences(path, report):
            sentences.append(sentence)
            if max_sentences is not None and len(sentences) >= max_sentences:
                break
        return self._read(path, sentences, report, build_labels, epochs)

    def read_sentences(self, sentences, build_labels=None, source="<in memory>", epochs=None):
        """`read` of sentences held in memory (`kbert predict`'s texts): no file is written or read.

        Args:
            sentences: list of sentences, each a list of (word, tag) pairs (a tag of the
                vocabulary; for prediction any one of them, since only x is used).
            build_labels: bool or None. As for `read`.
            source: str. The name errors give in place of a file's path; sentence i is its "line" i + 1.
            epochs: int or None. As for `read`.

        Example:
        >>> from keras_bert_impl.tokenization import BertPreprocessor
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]
        >>> reader = TaggingReader(BertPreprocessor(vocabulary, sequence_length=8))
        >>> x, y, w = next(iter(reader.read_sentences([[("a", "B-X"), ("b", "O")]])))
        >>> x["token_ids"].numpy().tolist(), w.numpy().tolist()
        ([[2, 5, 6, 3, 0, 0, 0, 0]], [[0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
        """
        _common.check_epochs(epochs)
        report = ReadReport(source, self.on_error)
        self.report = report
        numbered = [(line, list(words)) for line, words in enumerate(sentences, 1)]
        return self._read(source, numbered, report, build_labels, epochs)

    def _read(self, path, sentences, report, build_labels, epochs):
        if build_labels or (build_labels is None and self.labels is None):
            if not sentences:
                report.finish()
            self.labels = LabelVocabulary.from_values(tag for _, words in sentences for _, tag in words)
            logger.info("%s: tag vocabulary of %d tags built from this file", path, len(self.labels))
        encoded = self._encode(sentences, report)
        report.examples = len(encoded[0])
        report.finish()
        if report.counters["truncated_sequences"]:
            logger.warning(
                "%s: %d of %d sequences were longer than sequence_length=%s and were cut (%d words lost)",
                path,
                report.counters["truncated_sequences"],
                report.examples,
                self.sequence_length,
                report.counters["truncated_words"],
            )
        return self._dataset(*encoded, epochs=epochs)

    def sentences(self, path, report):
        """Yields (line, [(word, tag), ...]) per sentence, line being where it starts."""
        if self.file_format == "word/tag":
            yield from self._slash_sentences(path, report)
        else:
            yield from self._conll_sentences(path, report)

    def _slash_sentences(self, path, report):
        for line, text in _common.decoded_lines(path, report, skippable=True):
            items = text.split()
            if not items:
                continue
            words = []
            for item in items:
                word, slash, tag = item.rpartition("/")
                if not slash or not word or not tag:
                    report.fail(line, f"{item!r} is not word/TAG", kind="missing_tag")
                    break
                words.append((word, tag))
            else:
                yield line, words

    def _conll_sentences(self, path, report):
        start, words, bad, width = None, [], False, None
        for line, text in _common.decoded_lines(path, report, skippable=True, mark_skipped=True):
            if text is None:  # not UTF-8, reported and skipped: the sentence goes (as below), not one word
                start, bad = line if start is None else start, True
                continue
            columns = _columns(text)
            if not columns:
                if words and not bad:
                    yield start, words
                start, words, bad = None, [], False
                continue
            if columns[0] == "-DOCSTART-":
                continue
            if start is None:
                start = line
            if bad:
                continue  # the rest of a sentence already reported
            if len(columns) < 2 or len(columns) < abs(self.tag_column) + (0 if self.tag_column < 0 else 1):
                # Dropping just this word would shift every later tag: the sentence goes.
                report.fail(
                    line,
                    f"expected 'word TAG' columns (tag in column {self.tag_column}). Received: "
                    f"{text.strip()!r}",
                    kind="missing_tag",
                )
                bad = True
                continue
            # Every line as many columns as the file's first: a word holding a space ("New York") in a
            # space-separated file reads as one column more, and the word's tail was lost without a word.
            width = width or len(columns)
            if len(columns) != width:
                report.fail(
                    line,
                    f"has {len(columns)} columns where the file's first line has {width}: a word holding a "
                    "space? Separate the columns with tabs, or remove the space. Received: "
                    f"{text.strip()!r}",
                    kind="field_count",
                )
                bad = True
                continue
            words.append((columns[0], columns[self.tag_column]))
        if words and not bad:
            yield start, words

    def _encode(self, sentences, report):
        """token_ids, tag ids, weights: lists of int32 [length] rows."""
        flat = [word for _, words in sentences for word, _ in words]
        pieces = self.preprocessor.tokenize_lists(flat)
        room = None if self.sequence_length is None else self.sequence_length - 2
        all_ids, all_tags, all_weights = [], [], []
        cursor = 0
        for line, words in sentences:
            word_pieces = pieces[cursor : cursor + len(words)]
            cursor += len(words)
            empty = [word for (word, _), p in zip(words, word_pieces) if not p]
            if empty:
                report.fail(
                    line,
                    f"the word(s) {empty[:3]!r} have no wordpieces, so their tags cannot be placed",
                    kind="empty_word",
                )
                continue
            try:
                tag_ids = [self.labels.index(tag) for _, tag in words]
            except KeyError as e:
                report.fail(line, e.args[0], kind="unknown_label")
                continue
            ids, tags, weights = [self._cls_id], [self.ignore_label], [0.0]
            kept = 0
            for word_piece_ids, tag in zip(word_pieces, tag_ids):
                if room is not None and len(ids) - 1 >= room:
                    break  # not even this word's first piece fits
                take = word_piece_ids if room is None else word_piece_ids[: room - (len(ids) - 1)]
                ids.extend(take)
                tags.extend([tag] + [self.ignore_label] * (len(take) - 1))
                weights.extend([1.0] + [0.0] * (len(take) - 1))
                kept += 1
            if kept < len(words) or sum(len(p) for p in word_pieces) > len(ids) - 1:
                report.counters["truncated_sequences"] += 1
                report.counters["truncated_words"] += len(words) - kept
            ids.append(self._sep_id)
            tags.append(self.ignore_label)
            weights.append(0.0)
            all_ids.append(ids)
            all_tags.append(tags)
            all_weights.append(weights)
        return all_ids, all_tags, all_weights

    def _dataset(self, all_ids, all_tags, all_weights, epochs=None):
        width = self.sequence_length or max(len(ids) for ids in all_ids)
        n = len(all_ids)
        token_ids = np.full([n, width], self._pad_id, np.int32)  # [N, S]
        tags = np.full([n, width], self.ignore_label, np.int32)  # [N, S]
        weights = np.zeros([n, width], np.float32)  # [N, S]
        padding_mask = np.zeros([n, width], np.int32)  # [N, S]
        for i, (ids, row_tags, row_weights) in enumerate(zip(all_ids, all_tags, all_weights)):
            token_ids[i, : len(ids)] = ids
            tags[i, : len(ids)] = row_tags
            weights[i, : len(ids)] = row_weights
            padding_mask[i, : len(ids)] = 1
        x = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": padding_mask}
        dataset = _common.batched((x, tags, weights), n, self.batch_size, self.shuffle, self.seed, epochs)
        if self.sequence_length is None:
            # Per-batch padding, like the preprocessor's: cut the columns no row uses.
            def trim(x, y, w):
                used = tf.reduce_max(tf.reduce_sum(x["padding_mask"], axis=1))
                return {k: v[:, :used] for k, v in x.items()}, y[:, :used], w[:, :used]

            dataset = dataset.map(trim)
        return _common.prefetched(dataset)


def _columns(text):
    """A CoNLL line's columns: split at tabs when the line has any (a word may then hold a space),
    else at runs of ASCII spaces. Never at other Unicode spaces: "1\u00a0000" is one word."""
    text = text.strip(" \t\r\n\f\v")
    if "\t" in text:
        return [column.strip(" ") for column in text.split("\t")]
    return [column for column in re.split(r"[ \f\v]+", text) if column]
