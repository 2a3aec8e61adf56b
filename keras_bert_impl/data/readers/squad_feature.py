"""One packed SQuAD window and what is needed to turn predicted positions back into text."""

import dataclasses

import numpy as np


@dataclasses.dataclass
class SquadFeature:
    """The bookkeeping for one [CLS] question [SEP] context-window [SEP] row.

    Shape legend: S sequence length.

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
        char_spans: int32 [S, 2]. Character [start, end) in `context` of each
            context wordpiece; -1 for [CLS], question, [SEP] and padding.
        token_is_max_context: bool [S]. Whether this window gives the token its
            most centred view (Google's `_check_is_max_context`), for choosing
            among overlapping windows at prediction time.

    Example:
    >>> feature.answer_text(feature.start_position, feature.end_position)
    'Denver Broncos'
    """

    example_id: str
    window_index: int
    question: str
    context: str
    answers: list
    is_impossible: bool
    start_position: int
    end_position: int
    char_spans: np.ndarray
    token_is_max_context: np.ndarray

    def answer_text(self, start, end):
        """The context text under positions start..end (inclusive); "" when either is outside the context."""
        if not 0 <= start <= end < len(self.char_spans):
            return ""
        first, last = self.char_spans[start], self.char_spans[end]
        if first[0] < 0 or last[0] < 0:
            return ""
        return self.context[first[0]:last[1]]
