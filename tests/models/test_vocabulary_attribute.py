"""A model's vocabulary is a plain list attribute: Keras' tracker (and TensorFlow's under it)
does not wrap it. Wrapping walked all 30,522 of MiniLM's tokens on every `set_vocabulary`, that
is on every load of a model file and every BertPreprocessor.from_model: about 0.04 s of a tiny
model's 0.30 s load_model and 0.05 s of 0.43 s from_model (CPU seconds on the 2-core EPYC),
paid by each in-process kbert call of the command tests."""

import keras_bert_impl as kb
from keras_bert_impl.tokenization import BertPreprocessor

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"token{i}" for i in range(5000)]


def test_set_vocabulary_keeps_a_plain_list():
    backbone = kb.BertBackbone(
        vocabulary_size=len(VOCABULARY),
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
    )
    preprocessor = BertPreprocessor(sequence_length=8)
    backbone.set_vocabulary(VOCABULARY, lowercase=True)
    preprocessor.set_vocabulary(VOCABULARY, lowercase=True)
    for layer in (backbone, preprocessor):
        # type, not isinstance: the trackers' wrappers (TrackedList, ListWrapper) are lists too.
        assert type(layer.vocabulary) is list and layer.vocabulary == VOCABULARY
    assert preprocessor(["token7 token12"])["token_ids"].numpy()[0, :4].tolist() == [2, 12, 17, 3]
    # What a model file loads goes through the same set_vocabulary.
    assert type(BertPreprocessor.from_model(backbone).vocabulary) is list
