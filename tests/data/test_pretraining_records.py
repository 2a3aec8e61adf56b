"""TFRecords: Google's format both ways, atomic sharded writes, and one BertPretrainer step."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import keras_bert_impl
from keras_bert_impl.data import (
    PretrainingCorpus,
    PretrainingExampleBuilder,
    PretrainingMasker,
    PretrainingRecordReader,
    PretrainingRecordWriter,
)
from keras_bert_impl.tokenization.vocabulary import load_vocabulary
from tests.data.helpers import CLS, MASK, PAD, SEP
from tests.harness import assert_weights_changed

GOOGLE_FEATURES = {
    "input_ids": "int64_list",
    "input_mask": "int64_list",
    "segment_ids": "int64_list",
    "masked_lm_positions": "int64_list",
    "masked_lm_ids": "int64_list",
    "masked_lm_weights": "float_list",
    "next_sentence_labels": "int64_list",
}


@pytest.fixture(scope="module")
def subset_examples(review_subset_file, vocab_path):
    builder = PretrainingExampleBuilder(vocab_path, dupe_factor=1, document_buffer_size=100, seed=2)
    corpus = PretrainingCorpus(review_subset_file)
    return builder, corpus, list(builder.examples(corpus))


def _records(paths):
    return [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(paths)]


def _as_tuple(example):
    return tuple(tuple(np.round(example[k], 6)) for k in GOOGLE_FEATURES if k in example)


def test_round_trip_with_google_feature_names(subset_examples, tmp_path):
    builder, corpus, examples = subset_examples
    writer = builder.write(corpus, tmp_path / "out", num_shards=3, shuffle_buffer_size=200)
    assert [os.path.basename(p) for p in writer.paths] == [
        f"pretraining-0000{i}-of-00003.tfrecord" for i in range(3)
    ]
    assert sorted(os.listdir(tmp_path / "out")) == sorted(os.path.basename(p) for p in writer.paths) + [
        "pretraining.json"
    ]
    records = _records(writer.paths)
    assert len(records) == writer.count == len(examples)
    for record in records[:50]:
        kinds = {name: f.WhichOneof("kind") for name, f in record.features.feature.items()}
        assert kinds == GOOGLE_FEATURES  # Google's names; ints as int64, weights as floats
    decoded = [
        {name: list(getattr(f, f.WhichOneof("kind")).value) for name, f in r.features.feature.items()}
        for r in records
    ]
    assert sorted(map(_as_tuple, decoded)) == sorted(map(_as_tuple, examples))
    assert [_as_tuple(d) for d in decoded] != [_as_tuple(e) for e in examples]  # shuffled on the way out
    metadata = json.loads((tmp_path / "out" / "pretraining.json").read_text())
    assert metadata["examples"] == len(examples) and metadata["max_seq_length"] == 128 and metadata["masked"]


def test_reader_reads_google_written_records(subset_examples, vocab_path, tmp_path):
    """Records written by Google's write_instance_to_example_files (bert-tensorflow
    1.0.4) from our instances read back exactly as our own records do."""
    from bert import create_pretraining_data as google

    from tests.data.helpers import GoogleTokenizerStub

    builder, corpus, _ = subset_examples
    vocab = load_vocabulary(vocab_path)
    instances = list(builder.instances(corpus))[:300]

    class Instance:
        def __init__(self, i):
            self.tokens = [vocab[t] for t in i.token_ids]
            self.segment_ids = i.segment_ids
            self.masked_lm_positions = i.masked_lm_positions
            self.masked_lm_labels = [vocab[t] for t in i.masked_lm_ids]
            self.is_random_next = i.is_random_next

    google_path = str(tmp_path / "google.tfrecord")
    google.write_instance_to_example_files(
        [Instance(i) for i in instances], GoogleTokenizerStub(vocab, []), 128, 20, [google_path]
    )
    with PretrainingRecordWriter(tmp_path / "ours", num_shards=1, shuffle_buffer_size=1) as writer:
        for instance in instances:
            writer.write(builder.to_example(instance))
    theirs = list(PretrainingRecordReader(google_path).features().as_numpy_iterator())
    ours = list(PretrainingRecordReader(writer.paths).features().as_numpy_iterator())
    assert len(theirs) == len(ours) == 300
    for t, o in zip(theirs, ours):
        assert set(t) == set(o) == set(GOOGLE_FEATURES)
        for name in t:
            np.testing.assert_array_equal(t[name], o[name])


def test_writer_is_atomic_and_refuses_to_mix_runs(subset_examples, tmp_path):
    builder, corpus, examples = subset_examples
    out = tmp_path / "out"

    def failing():
        yield from examples[:100]
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        with PretrainingRecordWriter(out, num_shards=2) as writer:
            for example in failing():
                writer.write(example)
    assert os.listdir(out) == []  # no shard, no temporary file

    builder.write(corpus, out, num_shards=4)
    with pytest.raises(FileExistsError, match="already holds pretraining shards"):
        builder.write(corpus, out, num_shards=2)
    builder.write(corpus, out, num_shards=2, overwrite=True)
    assert sorted(os.listdir(out)) == [
        "pretraining-00000-of-00002.tfrecord",
        "pretraining-00001-of-00002.tfrecord",
        "pretraining.json",
    ]


def test_writer_keeps_other_prefixes_and_cleans_up_after_a_failing_close(
    subset_examples, tmp_path, monkeypatch
):
    builder, corpus, examples = subset_examples
    out = tmp_path / "out"
    # Another prefix whose name starts with this one's: an overwrite used to delete its shards as stale.
    builder.write(corpus, out, num_shards=2, prefix="pretraining-val")
    builder.write(corpus, out, num_shards=3)
    builder.write(corpus, out, num_shards=2, overwrite=True)
    assert sorted(os.listdir(out)) == [
        "pretraining-00000-of-00002.tfrecord",
        "pretraining-00001-of-00002.tfrecord",
        "pretraining-val-00000-of-00002.tfrecord",
        "pretraining-val-00001-of-00002.tfrecord",
        "pretraining-val.json",
        "pretraining.json",
    ]
    PretrainingRecordReader.from_directory(out, prefix="pretraining-val")

    # A full disk: TensorFlow's ResourceExhaustedError (not an OSError) becomes one naming the shard,
    # and no temporary file is left to keep the disk full.
    class FullDisk:
        def write(self, record):
            raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

        close = write

    with pytest.raises(OSError, match=r"pretraining-00000-of-00002.tfrecord failed: No space left on device"):
        with PretrainingRecordWriter(tmp_path / "full", num_shards=2, shuffle_buffer_size=1) as writer:
            for opened in writer._writers:
                opened.close()
            writer._writers = [FullDisk(), FullDisk()]
            for example in examples[:3]:
                writer.write(example)
    assert os.listdir(tmp_path / "full") == []

    # A rename that fails halfway through close: the temporary files go, the error is raised.
    renames = []

    def replace(source, target):
        renames.append(target)
        if len(renames) == 2:
            raise OSError("the disk went away")
        return real_replace(source, target)

    real_replace = os.replace
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="the disk went away"):
        builder.write(corpus, tmp_path / "halfway", num_shards=3)
    monkeypatch.setattr(os, "replace", real_replace)
    assert os.listdir(tmp_path / "halfway") == [
        "pretraining-00000-of-00003.tfrecord"
    ]  # no .tmp-, no metadata


def test_shards_of_two_writes_under_one_metadata_are_refused(subset_examples, tmp_path):
    """The writer renames its shards, then the metadata: a write killed between two renames leaves
    the new shards beside the old ones under the old metadata, which the reader now refuses."""
    builder, corpus, _ = subset_examples
    out = tmp_path / "out"
    builder.write(corpus, out, num_shards=2)
    PretrainingRecordReader.from_directory(out)
    other = PretrainingExampleBuilder(builder.vocabulary, dupe_factor=2, document_buffer_size=100, seed=9)
    other.write(corpus, tmp_path / "other", num_shards=2)
    os.replace(
        tmp_path / "other" / "pretraining-00001-of-00002.tfrecord",
        out / "pretraining-00001-of-00002.tfrecord",
    )
    with pytest.raises(
        ValueError,
        match=r"pretraining-00001-of-00002.tfrecord holds \d+ bytes, but .*pretraining.json "
        r"lists \d+: the shards and their metadata come from different writes",
    ):
        PretrainingRecordReader.from_directory(out)


def _check_batch(x, y, sample_weight, batch):
    assert set(x) == {"token_ids", "segment_ids", "padding_mask", "mask_positions"}
    assert all(v.dtype == tf.int32 for v in x.values())
    assert x["token_ids"].shape == (batch, 128) and x["mask_positions"].shape == (batch, 20)
    assert y["mlm_logits"].shape == (batch, 20) and y["nsp_logits"].shape == (batch,)
    assert sample_weight["mlm_logits"].dtype == tf.float32
    np.testing.assert_array_equal(sample_weight["nsp_logits"], np.ones(batch, "float32"))
    tokens, positions, weights = (
        x["token_ids"].numpy(),
        x["mask_positions"].numpy(),
        sample_weight["mlm_logits"].numpy(),
    )
    assert (tokens[:, 0] == CLS).all() and ((tokens == SEP).sum(1) == 2).all()
    assert ((tokens == PAD) == (x["padding_mask"].numpy() == 0)).all()
    assert set(np.unique(y["nsp_logits"])) <= {0, 1}
    picked = np.take_along_axis(tokens, positions, 1)[weights > 0]
    assert (picked == MASK).mean() > 0.6  # the inputs carry the masks; labels are the originals
    assert not np.isin(y["mlm_logits"].numpy()[weights > 0], [CLS, SEP, PAD]).any()


@pytest.mark.slow  # about 30 s: writes records and trains a pretrainer on them
def test_records_feed_bert_pretrainer(subset_examples, review_subset_file, vocab_path, tmp_path):
    """Static records, then unmasked records with dynamic (whole-word) masks,
    each for one `fit` step of the pretrainer from the issue."""
    builder, corpus, _ = subset_examples
    builder.write(corpus, tmp_path / "static", num_shards=2)
    static = PretrainingRecordReader.from_directory(tmp_path / "static").dataset(
        batch_size=16, shuffle_buffer_size=100, seed=1
    )
    _check_batch(*next(iter(static)), batch=16)

    unmasked = PretrainingExampleBuilder(vocab_path, dupe_factor=1, mask=False, document_buffer_size=100)
    unmasked.write(corpus, tmp_path / "dynamic", num_shards=1)
    with pytest.raises(ValueError, match="unmasked"):
        PretrainingRecordReader.from_directory(tmp_path / "dynamic")
    masker = PretrainingMasker(vocab_path, whole_word_masking=True)
    dynamic = PretrainingRecordReader.from_directory(tmp_path / "dynamic", masker=masker).dataset(
        batch_size=16, seed=4
    )
    _check_batch(*next(iter(dynamic)), batch=16)
    epoch1 = [x["mask_positions"].numpy() for x, _, _ in dynamic.take(2)]
    epoch2 = [x["mask_positions"].numpy() for x, _, _ in dynamic.take(2)]
    assert not all(np.array_equal(a, b) for a, b in zip(epoch1, epoch2))  # fresh masks per epoch

    backbone = keras_bert_impl.BertBackbone(
        vocabulary_size=30522,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=128,
    )
    pretrainer = keras_bert_impl.BertPretrainer(backbone)
    for ds in (static, dynamic):
        before = [w.numpy() for w in pretrainer.trainable_weights]
        history = pretrainer.fit(ds.take(1), epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"][0])
        assert_weights_changed(before, pretrainer)


def _rows(batches):
    """Each example of (x, y, w) batches as a hashable row: its token ids."""
    return [tuple(row) for x, _, _ in batches for row in x["token_ids"].numpy().tolist()]


def test_passes_are_a_function_of_seed_and_pass_alone(subset_examples, tmp_path):
    """dataset(passes=...): what kbert pretrain's resume skips through. Each pass holds every
    record once, passes differ, and a dataset built afresh and skipped to batch k gives the batch
    k of an uninterrupted one: a reshuffling buffer's order depended on how many iterators the
    process had made (a resumed run trained 23 of 91 rows twice and 23 never in one pass)."""
    builder, corpus, examples = subset_examples
    builder.write(corpus, tmp_path / "static", num_shards=3, shuffle_buffer_size=50)
    reader = PretrainingRecordReader.from_directory(tmp_path / "static")
    batches_per_pass = -(-len(examples) // 16)
    read = lambda: reader.dataset(batch_size=16, shuffle_buffer_size=40, seed=3, passes=3)  # noqa: E731
    whole = list(read())
    assert len(whole) == 3 * batches_per_pass
    written = sorted(_rows(reader.dataset(batch_size=16)))
    passes = [_rows(whole[i * batches_per_pass : (i + 1) * batches_per_pass]) for i in range(3)]
    for rows in passes:
        assert sorted(rows) == written  # every record once, none twice
    assert passes[0] != passes[1] != passes[2]
    start = batches_per_pass + 2
    it = iter(read())
    for _ in range(5):
        next(it)  # another iterator, advanced: it must not change what a new one gives
    assert _rows(list(read().skip(start))) == _rows(whole[start:])
    assert _rows(read()) == _rows(whole) and _rows(reader.dataset(16, 40, seed=4, passes=1)) != passes[0]


def test_a_masker_on_statically_masked_records_starts_from_the_original_tokens(
    subset_examples, vocab_path, tmp_path
):
    """The records' own masks are undone before the fresh ones: on statically masked records a
    dynamic masker used to mask text that was masked already ([MASK] left where nothing is
    labelled, and [MASK] as a label)."""
    builder, corpus, examples = subset_examples
    builder.write(corpus, tmp_path / "static", num_shards=1, shuffle_buffer_size=1)
    masker = PretrainingMasker(vocab_path)
    reader = PretrainingRecordReader.from_directory(tmp_path / "static", masker=masker)
    originals = []
    for example in examples:  # the text before static masking: labels put back at their positions
        ids = list(example["input_ids"])
        for position, token, weight in zip(
            example["masked_lm_positions"], example["masked_lm_ids"], example["masked_lm_weights"]
        ):
            if weight > 0:
                ids[position] = token
        originals.append(ids)
    labelled = unlabelled_masks = 0
    restored_rows = []
    for x, y, w in reader.dataset(batch_size=len(examples)):
        tokens, positions, weights = (
            x["token_ids"].numpy(),
            x["mask_positions"].numpy(),
            w["mlm_logits"].numpy(),
        )
        labels = y["mlm_logits"].numpy()
        for i, row in enumerate(tokens):
            restored = row.copy()
            real = weights[i] > 0
            restored[positions[i][real]] = labels[i][real]
            restored_rows.append(restored.tolist())
            masks = row == MASK
            masks[positions[i][real]] = False
            unlabelled_masks += int(masks.sum())
            labelled += int(real.sum())
        assert not np.isin(labels[weights > 0], [MASK]).any()
    assert sorted(restored_rows) == sorted(originals)
    assert labelled > 100 and unlabelled_masks == 0


def test_reader_errors(tmp_path, vocab_path):
    with pytest.raises(FileNotFoundError, match="No pretraining records match"):
        PretrainingRecordReader(str(tmp_path / "*.tfrecord"))
    with pytest.raises(FileNotFoundError, match="pretraining.json"):
        PretrainingRecordReader.from_directory(tmp_path)
    with pytest.raises(ValueError, match="max_predictions_per_seq differs"):
        PretrainingRecordReader(
            vocab_path, 128, 20, masker=PretrainingMasker(vocab_path, max_predictions_per_seq=10)
        )
    with pytest.raises(ValueError, match="num_shards must be a positive integer. Received: num_shards=0"):
        PretrainingRecordWriter(tmp_path, num_shards=0)
