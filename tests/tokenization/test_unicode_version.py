"""The normalizer's Unicode tables are Unicode 14.0.0 on every supported Python (issue 32).

Python 3.11, 3.12 and 3.13 ship Unicode 14.0.0, 15.0.0 and 15.1.0; bert_normalizer pins
14.0.0 (see UNICODE_VERSION). The digest below is of every codepoint's category and
normalisation (cased and uncased) as Python 3.11 computes them (the same with or without
the pin there), so the same test on 3.12 and 3.13 (`make test-pythons`) shows that a model
gets the same ids whichever Python runs it. Without the pin, 3.12 gives c36c3db... and
3.13 d51af44....
"""

import hashlib
import unicodedata

import pytest

from keras_bert_impl.tokenization import bert_normalizer
from keras_bert_impl.tokenization.bert_normalizer import UNICODE_VERSION, category, normalize_char

PYTHON_311_TABLE = "b38d8b5882ce76bb38d087bc7b8ef925b90e82a63fb6812ab7e0f7798749d2e0"


def test_every_codepoint_normalizes_as_on_python_311():
    digest = hashlib.sha256()
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        digest.update(f"{category(c)}\0{normalize_char(c, False)}\0{normalize_char(c, True)}\n".encode())
    assert digest.hexdigest() == PYTHON_311_TABLE, f"Python's unicodedata {unicodedata.unidata_version}"


def test_pinned_codepoints_are_unassigned_in_unicode_14_and_assigned_after():
    pinned = [cp for first, last in bert_normalizer._ASSIGNED_AFTER_14 for cp in range(first, last + 1)]
    assert len(pinned) == 5116
    version = unicodedata.unidata_version
    assigned = [cp for cp in pinned if unicodedata.category(chr(cp)) != "Cn"]
    # Each Python's own table: none of them on 3.11; the 15.0 part on 3.12; all of them on 3.13.
    assert len(assigned) == {"14.0.0": 0, "15.0.0": 4489, "15.1.0": 5116}[version]
    assert all(category(chr(cp)) == "Cn" for cp in pinned)
    assert UNICODE_VERSION == "14.0.0"


def test_a_newer_unicode_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setattr(unicodedata, "unidata_version", "16.0.0")
    bert_normalizer._unassigned_in_pinned_version.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"Unicode 16\.0\.0.*_ASSIGNED_AFTER_14"):
            category("a")
    finally:
        monkeypatch.undo()
        bert_normalizer._unassigned_in_pinned_version.cache_clear()
