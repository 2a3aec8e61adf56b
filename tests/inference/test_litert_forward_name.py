"""`Int8Forward`, LiteRtForward's name while it ran int8 only, stays importable as a deprecated
alias of the same class."""

import pytest


def test_the_old_name_is_the_same_class_with_a_deprecation_warning():
    from keras_bert_impl import inference
    from keras_bert_impl.inference import LiteRtForward

    with pytest.warns(DeprecationWarning, match="Int8Forward is now LiteRtForward"):
        from keras_bert_impl.inference import Int8Forward
    assert Int8Forward is LiteRtForward
    with pytest.raises(AttributeError, match="has no attribute 'Int9Forward'"):
        inference.Int9Forward
