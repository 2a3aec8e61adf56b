"""Documents -> sentence-pair pretraining examples, streamed with bounded memory.

This follows google-research/bert create_pretraining_data.py
(`create_training_instances`, `create_instances_from_document`,
`truncate_seq_pair`, `create_masked_lm_predictions`), draw for draw, with one
change: Google loads the whole corpus, shuffles it, and draws NotNext segments
from any document of the corpus. Here documents stream through a buffer of
`document_buffer_size` documents, which is both the shuffle window and the pool
the random documents come from. See `PretrainingExampleBuilder` for the details.
"""

import hashlib
import random

import numpy as np
import tensorflow as tf

from keras_bert_impl.data.pretraining_features import instance_to_example, tensor_signature
from keras_bert_impl.data.pretraining_instance import PretrainingInstance, truncate_seq_pair
from keras_bert_impl.data.pretraining_masker import PretrainingMasker
from keras_bert_impl.data.pretraining_record_writer import PretrainingRecordWriter
from keras_bert_impl.tokenization.bert_preprocessor import BertPreprocessor
from keras_bert_impl.tokenization.vocabulary import load_vocabulary
from keras_bert_impl.validation import (
    DEFAULT_SEQUENCE_LENGTH,
    check_bool,
    check_choice,
    check_fraction,
    check_int,
)

RANDOMNESS = ("stream", "keyed")


class PretrainingExampleBuilder:
    r"""Builds BERT's MLM + NSP examples from a `PretrainingCorpus`, in a stream.

    Per document (Google's `create_instances_from_document`): sentences are
    gathered into a chunk until it reaches the target length (max_seq_length - 3,
    or with probability `short_seq_prob` a random length in [2, that], drawn
    once per document as in Google's code); a random number of the chunk's
    sentences become segment A; B is the rest of the chunk (IsNext, label 0),
    or, half of the time, a run of sentences from a random other document
    (NotNext, label 1), and then the unused sentences of the chunk go back to
    the document. Pairs are truncated one token at a time from the longer side,
    front or back at random, and masked by `PretrainingMasker`.

    NSP balance: Google's code also forces NotNext whenever the chunk is a
    single sentence (a document's last sentence left alone, and most chunks of
    short-target documents, where one sentence already reaches the target).
    On the Pang & Lee reviews that makes 54% of the pairs NotNext, not 50%.
    With `balanced_nsp=True` (the default) every pair gets the fair coin: an
    IsNext one-sentence chunk takes as B the sentences that follow it in the
    document (until B reaches the target length), or, for the document's last
    sentence, becomes (previous sentence, last sentence). Only one-sentence
    documents are still forced to NotNext. `balanced_nsp=False` is Google's
    algorithm draw for draw.

    Streaming, and how it differs from Google: Google reads every document into
    memory, shuffles them, runs `dupe_factor` passes over the shuffled list, and
    picks NotNext segments from any document of the corpus. Here at most
    `document_buffer_size` tokenized documents are held. Once the buffer is
    full, each incoming document replaces a uniformly chosen buffered one, which
    is processed first (the buffer is a shuffle window, like tf.data's), and its
    NotNext segments come from the other buffered documents; at the end of the
    input the rest of the buffer is shuffled and processed. Each further
    `dupe_factor` pass re-reads the files. Memory is therefore O(document buffer)
    and does not grow with the corpus (the bound is in documents: for
    book-length documents, lower the buffer). Random documents come from the same
    neighbourhood of up to `document_buffer_size` documents rather than the whole
    corpus: with documents in random order that is still a random document for
    NSP, but for a corpus sorted by topic, shuffle the document order first or
    raise the buffer. When the whole corpus fits in the buffer (the input ends
    before the buffer fills), nothing is evicted and the algorithm is Google's
    exactly: one shuffle, then `dupe_factor` passes over the same list, with the
    same random draws as Google's code for the same seed and tokens (with
    `balanced_nsp=False`).

    Google also shuffles all instances at the end; `PretrainingRecordWriter`
    does that with a bounded shuffle buffer.

    Keyed randomness (`randomness="keyed"`): the streaming algorithm above draws
    everything from one `random.Random`, so its output depends on the order
    documents arrive in, which a pipeline of several workers does not fix. In
    keyed mode the corpus is cut into `CorpusSplit`s (each file, or each
    `split_bytes` of a text file, at document boundaries); a split is one pool,
    read whole, and each document's pass `p` draws from its own
    `random.Random` seeded by (seed, p, file index, document position), with
    NotNext segments from the other documents of its split. The examples are
    then a function of the seed, the files and `split_bytes` alone, the same
    multiset whether one process runs the splits in order (`examples`) or
    pipeline workers run one split each (`split_examples`:
    keras_bert_impl.pipelines.PretrainingPipeline); memory is one split's
    tokens. `document_buffer_size` plays no part there.

    Args:
        vocabulary: list of tokens, or a path to vocab.txt (WordPiece; casing is
            read off it).
        max_seq_length: packed length (>= 5: [CLS] a [SEP] b [SEP]).
        max_predictions_per_seq: masked-LM targets per sequence, at most.
        masked_lm_prob: fraction of tokens to mask, in (0, 1).
        short_seq_prob: probability of a shorter target length, in [0, 1].
        dupe_factor: passes over the corpus, each with new pairs and masks.
        whole_word_masking: mask whole words (see `PretrainingMasker`).
        balanced_nsp: a fair IsNext/NotNext coin for every pair (see above);
            False reproduces Google's output exactly.
        document_buffer_size: documents held at once (shuffle window and
            NotNext pool), at least 2.
        mask: False builds unmasked examples for dynamic masking (no
            masked_lm_* features).
        seed: seed of the `random.Random` all draws come from (Google's
            default is 12345).
        randomness: "stream" (the default: one random.Random over the stream,
            Google's draws) or "keyed" (per document and pass, the same on any
            runner; see above).
        split_bytes: keyed mode only: cut text files every this many bytes
            into splits (None: one split per file).
        tokenize_batch_size: sentences tokenized per call of the in-graph
            tokenizer.

    Example:
    >>> from keras_bert_impl.data import PretrainingCorpus
    >>> with open("reviews.txt", "w") as f:  # a sentence per line, a blank line between documents
    ...     _ = f.write("a long film.\nit is also funny.\nthe end drags.\n\na dull story.\nno one laughs.\n")
    >>> builder = PretrainingExampleBuilder("data/minilm/vocab.txt", max_seq_length=16,
    ...                                     max_predictions_per_seq=4)
    >>> first = next(builder.examples(PretrainingCorpus("reviews.txt")))
    >>> first["input_ids"], first["segment_ids"]
    ([101, 1037, 2146, 2143, 1012, 2009, 2003, 2036, 6057, 102, 103, 2203, 8011, 2015, 1012, 102],
     [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    >>> first["masked_lm_positions"], first["masked_lm_ids"], first["next_sentence_labels"]
    ([1, 10, 0, 0], [1037, 1996, 0, 0], [0])
    """

    def __init__(
        self,
        vocabulary,
        max_seq_length=DEFAULT_SEQUENCE_LENGTH,
        max_predictions_per_seq=20,
        masked_lm_prob=0.15,
        short_seq_prob=0.1,
        dupe_factor=10,
        whole_word_masking=False,
        balanced_nsp=True,
        document_buffer_size=1000,
        mask=True,
        seed=12345,
        tokenize_batch_size=2048,
        randomness="stream",
        split_bytes=None,
    ):
        vocabulary = load_vocabulary(vocabulary)
        check_int("max_seq_length", max_seq_length, 5)
        check_fraction("short_seq_prob", short_seq_prob, open_low=False, open_high=False)
        check_int("dupe_factor", dupe_factor, 1)
        # At least 2: with one document held, NotNext's random segment could only come from A's own
        # document (98% of NotNext pairs did, often the text that really follows A).
        check_int("document_buffer_size", document_buffer_size, 2)
        check_int("seed", seed, 0)
        check_int("tokenize_batch_size", tokenize_batch_size, 1)
        check_bool("mask", mask)
        check_bool("balanced_nsp", balanced_nsp)
        check_choice("randomness", randomness, RANDOMNESS)
        if split_bytes is not None:
            check_int("split_bytes", split_bytes, 1)
            if randomness != "keyed":
                raise ValueError(
                    f"split_bytes cuts the corpus for randomness='keyed' only. Received: "
                    f"split_bytes={split_bytes!r} with randomness={randomness!r}"
                )
        # The masker checks masked_lm_prob, max_predictions_per_seq, whole_word_masking.
        self.masker = PretrainingMasker(
            vocabulary, masked_lm_prob, max_predictions_per_seq, whole_word_masking
        )
        self.vocabulary = vocabulary
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.masked_lm_prob = masked_lm_prob
        self.short_seq_prob = short_seq_prob
        self.dupe_factor = dupe_factor
        self.whole_word_masking = whole_word_masking
        self.balanced_nsp = balanced_nsp
        self.document_buffer_size = document_buffer_size
        self.mask = mask
        self.seed = seed
        self.tokenize_batch_size = tokenize_batch_size
        self.randomness = randomness
        self.split_bytes = split_bytes
        self._preprocessor = BertPreprocessor(vocabulary, sequence_length=max_seq_length)
        # One traced graph for every batch instead of eager op-by-op dispatch.
        self._tokenize = tf.function(
            self._preprocessor.tokenize,
            input_signature=[tf.TensorSpec([None], tf.string)],
            reduce_retracing=True,
        )

    # ---- documents -> token ids ------------------------------------------

    def tokenized_documents(self, corpus):
        """Yields each document as a list of int32 arrays, one per sentence.

        Sentences are tokenized in batches; a sentence with no tokens is
        dropped and a document with no sentences skipped, as in Google's reader."""
        pending, pending_sentences = [], 0
        for document in corpus:
            pending.append(document)
            pending_sentences += len(document)
            if pending_sentences >= self.tokenize_batch_size:
                yield from filter(None, self._tokenize_documents(pending))
                pending, pending_sentences = [], 0
        if pending:
            yield from filter(None, self._tokenize_documents(pending))

    def keyed_pool(self, keyed_documents):
        """(key, document) pairs -> the list of (key, tokenized document), documents without
        tokens left out (as `tokenized_documents` does)."""
        pool, pending, pending_sentences = [], [], 0

        def flush():
            tokenized = self._tokenize_documents([document for _, document in pending])
            pool.extend((key, sentences) for (key, _), sentences in zip(pending, tokenized) if sentences)

        for key, document in keyed_documents:
            pending.append((key, document))
            pending_sentences += len(document)
            if pending_sentences >= self.tokenize_batch_size:
                flush()
                pending, pending_sentences = [], 0
        if pending:
            flush()
        return pool

    def _tokenize_documents(self, documents):
        ragged = self._tokenize(tf.constant([s for d in documents for s in d], tf.string))
        flat, splits = ragged.flat_values.numpy(), ragged.row_splits.numpy()
        sentence = 0
        for document in documents:
            first, last = splits[sentence], splits[sentence + len(document)]
            # A private copy, so a buffered document does not pin the whole batch's array.
            ids = flat[first:last].copy()
            bounds = splits[sentence : sentence + len(document) + 1] - first
            sentence += len(document)
            # Empty for a document without tokens: the callers leave it out.
            yield [ids[a:b] for a, b in zip(bounds[:-1], bounds[1:]) if b > a]

    # ---- token ids -> instances --------------------------------------------

    def instances(self, corpus, on_document=None):
        """Yields `PretrainingInstance`s; `on_document(n_instances)` is called
        after each document is processed (for progress bars)."""
        if self.randomness == "keyed":
            yield from self._keyed_instances(corpus, on_document)
            return
        rng = random.Random(self.seed)
        buffer = []
        streaming = yield from self._fill_and_evict(corpus, buffer, rng, on_document)
        if not buffer:
            raise ValueError(
                "The corpus has no text: no document has a sentence with WordPiece tokens. Check the files "
                "and --format (text: one sentence per line, blank line between documents)."
            )
        rng.shuffle(buffer)
        # A corpus that fitted gets Google's dupe_factor passes over one shuffled
        # list; a streamed one re-reads the files for each further pass.
        passes = 1 if streaming else self.dupe_factor
        for _ in range(passes):
            yield from self._drain(buffer, rng, on_document)
        for _ in range(self.dupe_factor - passes):
            buffer = []
            yield from self._fill_and_evict(corpus, buffer, rng, on_document)
            rng.shuffle(buffer)
            yield from self._drain(buffer, rng, on_document)

    def _keyed_instances(self, corpus, on_document):
        seen = False
        for split in corpus.splits(self.split_bytes):
            for _, instance in self.split_instances(corpus, split, on_document):
                seen = True
                yield instance
        if not seen:
            raise ValueError(
                "The corpus has no text: no document has a sentence with WordPiece tokens. Check the files "
                "and --format (text: one sentence per line, blank line between documents)."
            )

    def split_instances(self, corpus, split, on_document=None):
        """Keyed mode's instances of one `CorpusSplit` of `corpus`, every pass, as (key,
        instance); key = (pass, file index, document position, instance number), unique in
        the corpus. The split is read and tokenized whole: it is the NotNext pool."""
        pool = self.keyed_pool(corpus.keyed_documents(split))
        documents = [document for _, document in pool]
        for dupe_pass in range(self.dupe_factor):
            for index, (key, _) in enumerate(pool):
                rng = random.Random(keyed_seed(self.seed, dupe_pass, *key))
                instances = self._document_instances(documents, index, rng, on_document)
                for number, instance in enumerate(instances):
                    yield (dupe_pass, *key, number), instance

    def _fill_and_evict(self, corpus, buffer, rng, on_document):
        """Reads the corpus into `buffer`; once it is full, each new document
        replaces a random buffered one, which is processed first. Returns
        whether any document was evicted (the corpus did not fit)."""
        evicted = False
        for document in self.tokenized_documents(corpus):
            if len(buffer) < self.document_buffer_size:
                buffer.append(document)
                continue
            evicted = True
            j = rng.randint(0, self.document_buffer_size - 1)
            yield from self._document_instances(buffer, j, rng, on_document)
            buffer[j] = document
        return evicted

    def _drain(self, buffer, rng, on_document):
        for i in range(len(buffer)):
            yield from self._document_instances(buffer, i, rng, on_document)

    def _document_instances(self, documents, document_index, rng, on_document):
        instances = self.instances_from_document(documents, document_index, rng)
        if on_document is not None:
            on_document(len(instances))
        return instances

    def instances_from_document(self, documents, document_index, rng):
        """Google's `create_instances_from_document`: `documents` is the pool of
        tokenized documents, `documents[document_index]` the one to split."""
        document = documents[document_index]
        max_num_tokens = self.max_seq_length - 3  # [CLS], [SEP], [SEP]
        # Usually fill the sequence (padding is wasted compute); sometimes go
        # shorter to narrow the gap to fine-tuning inputs.
        target_seq_length = max_num_tokens
        if rng.random() < self.short_seq_prob:
            target_seq_length = rng.randint(2, max_num_tokens)

        # Segments follow the real sentence boundaries: a random split point in
        # the token stream would make NSP too easy.
        instances = []
        current_chunk, current_length = [], 0
        i = 0
        while i < len(document):
            segment = document[i]
            current_chunk.append(segment)
            current_length += len(segment)
            if i == len(document) - 1 or current_length >= target_seq_length:
                if current_chunk:
                    instance, i = self._chunk_instance(
                        documents, document_index, current_chunk, i, target_seq_length, rng
                    )
                    instances.append(instance)
                current_chunk, current_length = [], 0
            i += 1
        return instances

    def _chunk_instance(self, documents, document_index, chunk, i, target_seq_length, rng):
        """The instance of `chunk`, the sentences that end at `documents[document_index][i]`, and
        the sentence index the walk goes on from (B may give sentences back or take more)."""
        a_end = 1
        if len(chunk) >= 2:
            a_end = rng.randint(1, len(chunk) - 1)
        tokens_a = [token for segment in chunk[:a_end] for token in segment.tolist()]
        document = documents[document_index]
        if self.balanced_nsp:
            # A fair coin for every pair; Google's code forces NotNext
            # for one-sentence chunks (see the class docstring).
            is_random_next = rng.random() < 0.5 or len(document) == 1
        else:
            is_random_next = len(chunk) == 1 or rng.random() < 0.5
        target_b_length = target_seq_length - len(tokens_a)
        if is_random_next:
            tokens_b = _random_segment(documents, document_index, target_b_length, rng)
            # The chunk's unused sentences go back to the document.
            i -= len(chunk) - a_end
        elif len(chunk) > 1:
            tokens_b = [token for segment in chunk[a_end:] for token in segment.tolist()]
        elif i < len(document) - 1:
            # balanced_nsp, one-sentence chunk mid-document: B is
            # the sentences that follow, consumed from the document.
            tokens_b = []
            while i < len(document) - 1:
                i += 1
                tokens_b.extend(document[i].tolist())
                if len(tokens_b) >= target_b_length:
                    break
        else:
            # balanced_nsp, the document's last sentence alone: pair
            # it with the sentence before (reused from the last pair).
            tokens_a = document[i - 1].tolist()
            tokens_b = document[i].tolist()
        return self._instance(tokens_a, tokens_b, is_random_next, rng), i

    def _instance(self, tokens_a, tokens_b, is_random_next, rng):
        truncate_seq_pair(tokens_a, tokens_b, self.max_seq_length - 3, rng)
        if not tokens_a or not tokens_b:  # Google asserts; unreachable for max_seq_length >= 5
            raise AssertionError("empty segment after truncation")

        cls_id, sep_id = self.masker.cls_id, self.masker.sep_id
        tokens = [cls_id] + tokens_a + [sep_id] + tokens_b + [sep_id]
        segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        positions, labels = [], []
        if self.mask:
            tokens, positions, labels = self.masker.mask_ids(tokens, rng)
        return PretrainingInstance(tokens, segment_ids, is_random_next, positions, labels)

    # ---- instances -> padded features ---------------------------------------

    def to_example(self, instance):
        """A `PretrainingInstance` -> dict of padded lists under Google's feature names."""
        return instance_to_example(
            instance, self.max_seq_length, self.max_predictions_per_seq, self.masker.pad_id, self.mask
        )

    def examples(self, corpus, on_document=None):
        """Yields padded examples (dicts of lists, Google's names), in creation order."""
        for instance in self.instances(corpus, on_document):
            yield self.to_example(instance)

    def metadata(self):
        """The settings, as stored next to the records (`<prefix>.json`)."""
        return {
            "format": "google-bert-pretraining",
            "masked": self.mask,
            "max_seq_length": self.max_seq_length,
            "max_predictions_per_seq": self.max_predictions_per_seq,
            "masked_lm_prob": self.masked_lm_prob,
            "short_seq_prob": self.short_seq_prob,
            "dupe_factor": self.dupe_factor,
            "whole_word_masking": self.whole_word_masking,
            "balanced_nsp": self.balanced_nsp,
            "document_buffer_size": self.document_buffer_size,
            "seed": self.seed,
            "randomness": self.randomness,
            "split_bytes": self.split_bytes,
            "vocabulary_size": len(self.vocabulary),
            "next_sentence_labels": "0 = IsNext, 1 = NotNext (random)",
        }

    def write(
        self,
        corpus,
        output_dir,
        num_shards=4,
        shuffle_buffer_size=10000,
        overwrite=False,
        on_document=None,
        prefix="pretraining",
    ):
        """Builds the examples of `corpus` into sharded TFRecords (see
        `PretrainingRecordWriter`); returns the closed writer (`.paths`, `.count`)."""
        writer = PretrainingRecordWriter(
            output_dir,
            num_shards=num_shards,
            prefix=prefix,
            shuffle_buffer_size=shuffle_buffer_size,
            seed=self.seed,
            overwrite=overwrite,
            metadata=self.metadata(),
        )
        with writer:
            for example in self.examples(corpus, on_document):
                writer.write(example)
        return writer

    def as_dataset(self, corpus):
        """The examples as an unbatched tf.data.Dataset (int32 ids, float32
        weights), built on the fly without files. Batch it and map
        `to_pretrainer_inputs` (or `PretrainingMasker.dynamic` first when
        `mask=False`) to train on it. Shuffle it too: examples come in document order."""
        signature = tensor_signature(self.max_seq_length, self.max_predictions_per_seq, masked=self.mask)

        def generate():
            for example in self.examples(corpus):
                yield {k: np.asarray(v, signature[k].dtype.as_numpy_dtype) for k, v in example.items()}

        return tf.data.Dataset.from_generator(generate, output_signature=signature)


def keyed_seed(*key):
    """A 64-bit seed from a tuple of ints and strings, the same in every process (Python's hash()
    of a str is salted per process)."""
    return int.from_bytes(hashlib.sha256(repr(key).encode("utf-8")).digest()[:8], "little")


def _random_segment(documents, document_index, target_length, rng):
    """Google's random next segment: sentences from a random point of another document (ten tries
    to avoid `document_index` itself) until `target_length` tokens."""
    for _ in range(10):
        random_document_index = rng.randint(0, len(documents) - 1)
        if random_document_index != document_index:
            break
    random_document = documents[random_document_index]
    random_start = rng.randint(0, len(random_document) - 1)
    tokens = []
    for j in range(random_start, len(random_document)):
        tokens.extend(random_document[j].tolist())
        if len(tokens) >= target_length:
            break
    return tokens
