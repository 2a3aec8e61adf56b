"""SQuAD v1.1 / v2.0 JSON -> tf.data batches of packed question/context windows with span labels.

Shape legend: B batch, S sequence length, N packed windows (features).
"""

import functools
import json
import re

import numpy as np

from keras_bert_impl.data.readers import _common
from keras_bert_impl.data.readers.malformed_row_error import MalformedRowError
from keras_bert_impl.data.readers.read_report import ReadReport
from keras_bert_impl.data.readers.squad_feature import SquadFeature
from keras_bert_impl.tokenization.bert_normalizer import is_whitespace, normalize_char
from keras_bert_impl.tokenization.vocabulary import piece_text, special_token_ids
from keras_bert_impl.validation import check_positive_int

# What BERT's normalisation makes of one character, asked once per character of every context.
_normalized = functools.lru_cache(maxsize=1 << 16)(normalize_char)


def _words(text):
    """[(start, end)] character spans of the whitespace-separated words of `text`.

    BERT's own whitespace: splitting on exactly it keeps each word's tokenization
    equal to its share of the whole context's."""
    spans, start = [], None
    for i, char in enumerate(text):
        if is_whitespace(char):
            if start is not None:
                spans.append((start, i))
                start = None
        elif start is None:
            start = i
    if start is not None:
        spans.append((start, len(text)))
    return spans


def _max_context(windows, window_index, position):
    """Google's `_check_is_max_context`: the window where `position` has the
    largest min(left, right) context (ties to the longer window, then the first)."""
    best_score, best_index = None, None
    for index, (start, length) in enumerate(windows):
        end = start + length - 1
        if not start <= position <= end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return window_index == best_index


class SquadReader:
    """Reads SQuAD v1.1/v2.0 files into `BertSpanLabeler` training rows.

    Each question is packed with its paragraph as `[CLS] question [SEP]
    context [SEP]`, the question cut to `max_query_length` wordpieces.
    Contexts longer than the room left are cut into windows that start
    `doc_stride` wordpieces apart (Google's `run_squad.py`), one row each.

    Answers are given as character positions in the original context. The
    context is tokenized by the preprocessor itself, word by word, and each
    wordpiece gets the span of original characters it came from (see
    `_tokenize_contexts`), so lower-casing and accent stripping that change
    lengths ("Beyoncé" -> "beyonce") cannot shift an answer. The labelled
    start/end are the first and last wordpieces overlapping the answer's
    characters; for answers on whole words this is exactly Google's
    `run_squad.py` labelling (`_improve_answer_span`). As in Google's reader,
    a window that does not contain the whole answer is labelled 0/0 ([CLS]),
    and so is every window of a v2.0 unanswerable question. Questions with
    several answers (dev sets) are labelled with the first; all are kept in
    `reader.features` for evaluation.

    y is a dict keyed like `BertSpanLabeler`'s outputs: `start_logits` and
    `end_logits`, the int32 [B] positions to fit them to.

    Args:
        preprocessor: a `BertPreprocessor` with a vocabulary and an int
            `sequence_length` (the window size).
        doc_stride: int. Wordpieces between window starts (Google: 128).
        max_query_length: int. Question wordpieces kept (Google: 64).
        version_2_with_negative: bool or None. Whether questions may be
            unanswerable; None reads it off the file (`is_impossible` keys or a
            "v2" version string).
        batch_size: int.
        shuffle: bool. Shuffle the windows each epoch (training).
        seed: int or None.
        on_error: "raise" or "skip" (count and log) for malformed questions:
            an answer that is not at its `answer_start` in the context, missing
            fields, an answerable question without answers. Invalid JSON always
            raises (it names the line).

    Example:
    >>> import json
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> context = ("The Virgin Mary reputedly appeared to Saint Bernadette Soubirous in 1858 at Lourdes, "
    ...            "France.")
    >>> answer = {"text": "Saint Bernadette Soubirous", "answer_start": 38}
    >>> qa = {"id": "q1", "question": "To whom did Mary appear?", "answers": [answer]}
    >>> with open("dev.json", "w") as f:
    ...     json.dump({"version": "1.1", "data": [{"paragraphs": [{"context": context, "qas": [qa]}]}]}, f)
    >>> pre = BertPreprocessor("data/minilm/vocab.txt", sequence_length=24)
    >>> reader = SquadReader(pre, doc_stride=8, max_query_length=8)
    >>> x, y = next(iter(reader.read("dev.json")))  # two windows; the second cuts the answer: 0/0 ([CLS])
    >>> y["start_logits"].numpy(), y["end_logits"].numpy()
    (array([15,  0], dtype=int32), array([22,  0], dtype=int32))
    >>> [f.answer_text(f.start_position, f.end_position) for f in reader.features]
    ['Saint Bernadette Soubirous', '']
    """

    def __init__(
        self,
        preprocessor,
        doc_stride=128,
        max_query_length=64,
        version_2_with_negative=None,
        batch_size=32,
        shuffle=False,
        seed=None,
        on_error="raise",
    ):
        vocabulary, lowercase, sequence_length = _common.preprocessor_settings(preprocessor)
        if sequence_length is None:
            raise ValueError(
                "SquadReader packs fixed windows: build the preprocessor with an int sequence_length "
                "(e.g. 384). Received: sequence_length=None"
            )
        check_positive_int("doc_stride", doc_stride)
        check_positive_int("max_query_length", max_query_length)
        if sequence_length - max_query_length - 3 < 1:
            raise ValueError(
                "sequence_length must leave room for [CLS], [SEP], [SEP], the question and at least one "
                f"context wordpiece. Received: sequence_length={sequence_length}, "
                f"max_query_length={max_query_length}"
            )
        if version_2_with_negative is not None and not isinstance(version_2_with_negative, bool):
            raise ValueError(
                "version_2_with_negative must be True, False or None. "
                f"Received: version_2_with_negative={version_2_with_negative!r}"
            )
        _common.set_reading(self, preprocessor, batch_size, shuffle, seed, on_error)
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        self.version_2_with_negative = version_2_with_negative
        self.sequence_length = sequence_length
        self._pad_id, self._cls_id, self._sep_id, self._unk_id = special_token_ids(
            vocabulary, "[PAD]", "[CLS]", "[SEP]", "[UNK]"
        )
        self._lowercase = bool(lowercase)
        # Piece text as it appears in normalised text: "##ing" continues a word as "ing".
        self._piece_text = [piece_text(t) for t in vocabulary]
        self.features = []
        self.report = None

    def read(self, path, epochs=None):
        """Reads one SQuAD JSON file into a `tf.data.Dataset` of (x, y) batches.

        `reader.features` gets one `SquadFeature` per row, in dataset order
        before shuffling; `reader.report` the counts (questions, windows,
        truncated questions, skipped questions by kind). `epochs` as for
        `ClassificationReader.read`: None one pass, an int that many passes
        ordered by (seed, pass) alone.
        """
        _common.check_epochs(epochs)
        path = _common.check_file(path)
        raw = "".join(text for _, text in _common.decoded_lines(path))
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as e:
            raise MalformedRowError(
                path,
                e.lineno,
                f"invalid JSON ({e.msg} at column {e.colno})",
                kind="bad_json",
                skippable=False,
            ) from None
        return self._read(path, raw, data, epochs)

    def read_data(self, data, source="<in memory>", epochs=None):
        """`read` of a SQuAD file's parsed JSON, `{"version": ..., "data": [...]}`, from memory
        (`kbert predict`'s questions): no file is written or read.

        Args:
            data: dict. What `json.load` gives of a SQuAD v1.1/v2.0 file.
            source: str. The name errors give in place of a file's path.
            epochs: int or None. As for `read`.

        Example:
        >>> from keras_bert_impl.tokenization import BertPreprocessor
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]
        >>> reader = SquadReader(BertPreprocessor(vocabulary, sequence_length=16), max_query_length=4)
        >>> qa = {"id": "1", "question": "a", "answers": [{"text": "b", "answer_start": 2}]}
        >>> _ = reader.read_data({"data": [{"paragraphs": [{"context": "a b", "qas": [qa]}]}]})
        >>> len(reader.features)
        1
        """
        _common.check_epochs(epochs)
        # Errors locate a question by its line in the JSON text: the text json.dump would have written.
        return self._read(source, json.dumps(data), data, epochs)

    def _read(self, source, raw, data, epochs):
        report = ReadReport(source, self.on_error)
        self.report = report
        questions = self._questions(source, raw, data, report)
        features, arrays = self._features(raw, questions, report)
        report.examples = len({f.example_id for f in features})
        report.counters["windows"] = len(features)
        report.finish()
        self.features = features
        return self._dataset(features, *arrays, epochs=epochs)

    # -- parsing --------------------------------------------------------------

    def _questions(self, path, raw, data, report):
        """Checked questions as dicts (id, question, context index, answer char span, answers, impossible)."""
        if not isinstance(data, dict) or not isinstance(data.get("data"), list):
            raise MalformedRowError(
                path,
                1,
                'not a SQuAD file: expected {"version": ..., "data": [...]} at the top',
                kind="bad_json",
                skippable=False,
            )
        v2 = self.version_2_with_negative
        if v2 is None:
            v2 = "v2" in str(data.get("version", "")) or '"is_impossible"' in raw
        self._contexts = []
        questions = []
        for a, article in enumerate(data["data"]):
            paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
            if not isinstance(paragraphs, list):
                report.fail(
                    None,
                    "an article without a 'paragraphs' list",
                    kind="missing_field",
                    location=f"data[{a}]",
                )
                continue
            for p, paragraph in enumerate(paragraphs):
                where = f"data[{a}].paragraphs[{p}]"
                context = paragraph.get("context") if isinstance(paragraph, dict) else None
                qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
                if not isinstance(context, str) or not isinstance(qas, list):
                    line = _locate(raw, "context", context) if isinstance(context, str) else None
                    report.fail(
                        line,
                        "a paragraph needs a 'context' string and a 'qas' list",
                        kind="missing_field",
                        location=where,
                    )
                    continue
                context_index = len(self._contexts)
                self._contexts.append(context)
                for q, qa in enumerate(qas):
                    checked = self._question(raw, qa, context, context_index, v2, f"{where}.qas[{q}]", report)
                    if checked is not None:
                        questions.append(checked)
        return questions

    def _question(self, raw, qa, context, context_index, v2, where, report):
        qid = qa.get("id") if isinstance(qa, dict) else None
        if qid is not None:
            where = f"{where} (id {qid})"

        def fail(reason, kind):
            report.fail(_locate(raw, "id", qid), reason, kind=kind, location=where)

        if (
            not isinstance(qa, dict)
            or not isinstance(qid, (str, int))
            or not isinstance(qa.get("question"), str)
        ):
            return fail("a question needs an 'id' and a 'question' string", "missing_field")
        impossible = qa.get("is_impossible", False)
        if not isinstance(impossible, bool):
            return fail(f"'is_impossible' must be true or false. Received: {impossible!r}", "missing_field")
        if impossible and not v2:
            return fail(
                "an unanswerable question (is_impossible) in a SQuAD v1.1 file; pass "
                "version_2_with_negative=True",
                "unexpected_impossible",
            )
        answers = qa.get("answers", [])
        if not isinstance(answers, list) or any(
            not isinstance(x, dict)
            or not isinstance(x.get("text"), str)
            or isinstance(x.get("answer_start"), bool)
            or not isinstance(x.get("answer_start"), int)
            for x in answers
        ):
            return fail("'answers' must be a list of {'text': str, 'answer_start': int}", "missing_field")
        question = {
            "id": str(qid),
            "question": qa["question"],
            "context": context_index,
            "answers": [x["text"] for x in answers],
            "impossible": impossible,
            "span": None,
        }
        if impossible:
            return question
        if not answers:
            hint = "" if v2 else " (SQuAD v1.1 questions all have one)"
            return fail(f"an answerable question without answers{hint}", "missing_answer")
        text, start = answers[0]["text"], answers[0]["answer_start"]
        end = start + len(text)
        if not text.strip():
            return fail(f"the answer text is empty. Received: {text!r}", "answer_not_in_context")
        if start < 0 or end > len(context) or context[start:end] != text:
            found = context.find(text)
            seen = context[max(0, start) : max(0, end)]
            hint = (
                f"; the text occurs at {found}" if found >= 0 else "; the text does not occur in the context"
            )
            return fail(
                f"answer {text!r} is not in its context at answer_start={start} (the context has {seen!r} "
                f"there{hint})",
                "answer_not_in_context",
            )
        question["span"] = (start, end)
        return question

    # -- tokenizing and packing -----------------------------------------------

    def _tokenize_contexts(self, report):
        """Per context: wordpiece ids int32 [P] and their character spans int32 [P, 2].

        The ids are the preprocessor's own, tokenizing the context word by word
        (BERT tokenizes words independently, so they equal the whole context's).
        Each word's pieces are then laid over the word's characters: pieces
        concatenate to the word's normalised text ("zurich" for "Zürich",
        "i" for "İ"), and every normalised character
        remembers the original character it came from, so lower-casing and
        accent stripping that change lengths still map back exactly. A word
        holding an [UNK] (no piece text to match) gives each of its pieces the
        whole word's span; they are counted as `pieces_spanning_word`.
        """
        words = [_words(context) for context in self._contexts]
        flat = [context[a:b] for context, spans in zip(self._contexts, words) for a, b in spans]
        pieces = self.preprocessor.tokenize_lists(flat)
        results, cursor = [], 0
        for context, spans in zip(self._contexts, words):
            ids, char_spans = [], []
            for (start, end), word_ids in zip(spans, pieces[cursor : cursor + len(spans)]):
                ids.extend(word_ids)
                char_spans.extend(self._piece_spans(context, start, end, word_ids, report))
            cursor += len(spans)
            results.append((np.asarray(ids, np.int32), np.asarray(char_spans, np.int32).reshape(-1, 2)))
        return results

    def _piece_spans(self, context, start, end, word_ids, report):
        if not word_ids:
            return []
        if self._unk_id not in word_ids:
            owner = []  # owner[k]: the original character behind normalised character k
            for i in range(start, end):
                owner.extend([i] * len(_normalized(context[i], self._lowercase)))
            texts = [self._piece_text[i] for i in word_ids]
            if sum(len(t) for t in texts) == len(owner) and "".join(texts) == "".join(
                _normalized(c, self._lowercase) for c in context[start:end]
            ):
                spans, k = [], 0
                for text in texts:
                    spans.append((owner[k], owner[k + len(text) - 1] + 1))
                    k += len(text)
                return spans
        report.counters["pieces_spanning_word"] += len(word_ids)
        return [(start, end)] * len(word_ids)

    def _tokenize_questions(self, questions):
        return self.preprocessor.tokenize_lists([q["question"] for q in questions])

    def _features(self, raw, questions, report):
        """SquadFeatures and the packed rows: token_ids [N, S], segment_ids [N, S], lengths [N]."""
        contexts = self._tokenize_contexts(report)
        question_ids = self._tokenize_questions(questions)
        features, all_token_ids, all_segment_ids, lengths = [], [], [], []
        length = self.sequence_length
        for question, query in zip(questions, question_ids):
            doc_ids, doc_spans = contexts[question["context"]]
            context = self._contexts[question["context"]]
            if len(doc_ids) == 0:
                report.fail(
                    _locate(raw, "id", question["id"]),
                    "the context has no wordpieces",
                    kind="empty_context",
                    location=f"id {question['id']}",
                )
                continue
            answer = None
            if question["span"] is not None:
                char_start, char_end = question["span"]
                inside = np.nonzero((doc_spans[:, 1] > char_start) & (doc_spans[:, 0] < char_end))[0]
                if len(inside) == 0:
                    report.fail(
                        _locate(raw, "id", question["id"]),
                        f"the answer {question['answers'][0]!r} covers no wordpiece",
                        kind="answer_not_in_context",
                        location=f"id {question['id']}",
                    )
                    continue
                answer = (int(inside[0]), int(inside[-1]))  # wordpiece indices in the context
            if len(query) > self.max_query_length:
                query = query[: self.max_query_length]
                report.counters["truncated_questions"] += 1
            room = length - len(query) - 3
            windows = []
            start = 0
            while start < len(doc_ids):
                span = min(len(doc_ids) - start, room)
                windows.append((start, span))
                if start + span == len(doc_ids):
                    break
                start += min(span, self.doc_stride)
            offset = len(query) + 2  # [CLS] question [SEP]
            for index, (start, span) in enumerate(windows):
                token_ids = np.full([length], self._pad_id, np.int32)
                segment_ids = np.zeros([length], np.int32)
                row = (
                    [self._cls_id]
                    + list(query)
                    + [self._sep_id]
                    + doc_ids[start : start + span].tolist()
                    + [self._sep_id]
                )
                token_ids[: len(row)] = row
                segment_ids[offset : len(row)] = 1
                max_context = np.array([_max_context(windows, index, start + i) for i in range(span)], bool)
                start_position = end_position = 0
                if answer is not None and start <= answer[0] and answer[1] <= start + span - 1:
                    start_position, end_position = answer[0] - start + offset, answer[1] - start + offset
                features.append(
                    SquadFeature(
                        example_id=question["id"],
                        window_index=index,
                        question=question["question"],
                        context=context,
                        answers=question["answers"],
                        is_impossible=question["impossible"],
                        start_position=start_position,
                        end_position=end_position,
                        context_offset=offset,
                        char_spans=doc_spans[start : start + span],
                        token_is_max_context=max_context,
                    )
                )
                all_token_ids.append(token_ids)
                all_segment_ids.append(segment_ids)
                lengths.append(len(row))
        if not features:
            return features, (
                np.zeros([0, length], np.int32),
                np.zeros([0, length], np.int32),
                np.zeros([0], np.int64),
            )
        return features, (np.stack(all_token_ids), np.stack(all_segment_ids), np.array(lengths))

    def _dataset(self, features, token_ids, segment_ids, lengths, epochs=None):
        padding_mask = (np.arange(self.sequence_length)[None, :] < lengths[:, None]).astype(
            np.int32
        )  # [N, S]
        x = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        y = {
            "start_logits": np.array([f.start_position for f in features], np.int32),
            "end_logits": np.array([f.end_position for f in features], np.int32),
        }
        dataset = _common.batched((x, y), len(features), self.batch_size, self.shuffle, self.seed, epochs)
        return _common.prefetched(dataset)


def _locate(raw, key, value):
    """1-based line of `"key": value` in the raw JSON text, or None. Only run
    for rows being reported, so the file is never scanned otherwise."""
    if value is None:
        return None
    for text in {json.dumps(value), json.dumps(value, ensure_ascii=False)}:
        # A long context is matched on its start (JSON escapes may differ later on).
        needle = text[:60] if len(text) > 60 else text
        match = re.search(r'"%s"\s*:\s*%s' % (re.escape(key), re.escape(needle)), raw)
        if match:
            return raw.count("\n", 0, match.start()) + 1
    return None
