"""One packed SQuAD window and what is needed to turn predicted positions back into text."""

import dataclasses

import numpy as np


@dataclasses.dataclass
class SquadFeature:
    """The bookkeeping for one `[CLS] question [SEP] context-window [SEP]` row.

    Row positions p >= `context_offset` hold context wordpieces; the arrays
    below are indexed by p - context_offset (W = wordpieces in this window).
    `char_spans` is a view into one array shared by all windows of the
    paragraph, so SQuAD-train-sized files keep little beside the rows.

    Attributes:
        example_id: str. The question's SQuAD id.
        window_index: int. Which document-stride window of the context (0-based).
        question: str.
        context: str. The whole paragraph.
        answers: list of str. Every given answer text (SQuAD dev sets list several).
        is_impossible: bool. SQuAD v2.0 unanswerable question.
        start_position: int. Labelled start in the row (0, i.e. [CLS], when the
            answer is not inside this window or there is none).
        end_position: int. Labelled end, inclusive.
        context_offset: int. Row position of the window's first wordpiece.
        char_spans: int32 [W, 2]. Character [start, end) in `context` of each
            context wordpiece of the window.
        token_is_max_context: bool [W]. Whether this window gives the wordpiece
            its most centred view (Google's `_check_is_max_context`), for
            choosing among overlapping windows at prediction time.

    Example:
    >>> import json
    >>> from keras_bert_impl.data.readers import SquadReader
    >>> from keras_bert_impl.tokenization import BertPreprocessor
    >>> reader = SquadReader(BertPreprocessor("data/minilm/vocab.txt", sequence_length=128))
    >>> qa = {"id": "q1", "question": "Who preached?",
    ...       "answers": [{"text": "Huldrych Zwingli", "answer_start": 0}]}
    >>> with open("dev.json", "w") as f:
    ...     json.dump({"data": [{"paragraphs": [{"context": "Huldrych Zwingli preached in Zurich.",
    ...                                          "qas": [qa]}]}]}, f)
    >>> _ = reader.read("dev.json")
    >>> # [CLS] who preached ? [SEP] hu ##ld ##ry ##ch z ##wing ##li preached ...
    >>> feature = reader.features[0]
    >>> feature.context_offset, feature.start_position, feature.end_position
    (5, 5, 11)
    >>> feature.answer_text(feature.start_position, feature.end_position)
    'Huldrych Zwingli'
    """

    example_id: str
    window_index: int
    question: str
    context: str
    answers: list
    is_impossible: bool
    start_position: int
    end_position: int
    context_offset: int
    char_spans: np.ndarray
    token_is_max_context: np.ndarray

    def answer_text(self, start, end):
        """The context text under row positions start..end (inclusive); "" when either is outside the
        window."""
        first, last = start - self.context_offset, end - self.context_offset
        if not 0 <= first <= last < len(self.char_spans):
            return ""
        return self.context[self.char_spans[first][0] : self.char_spans[last][1]]

    def is_max_context(self, position):
        """Whether row `position` is a context wordpiece best seen in this window."""
        index = position - self.context_offset
        return 0 <= index < len(self.token_is_max_context) and bool(self.token_is_max_context[index])
