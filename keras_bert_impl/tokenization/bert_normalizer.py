"""BERT's text normalisation, and the same as a tensorflow-text FastBertNormalizer model.

Google's `tokenization.py` (and Hugging Face's BertNormalizer) clean the text
and, for uncased vocabularies, strip accents and lower-case it before splitting
words. `normalize_char` is that rule for one character; `bert_normalizer_model`
compiles it for every codepoint into the flatbuffer that tensorflow-text's
FastBertNormalizer (and FastBertTokenizer) reads, because tf-text's own
normaliser applies ICU's NFKC_Casefold instead ("…" -> "...", "ß" -> "ss").
Everything that normalises text (the preprocessor, the vocabulary learner, the
SQuAD reader's character alignment) goes through this module.
"""

import functools
import unicodedata

import flatbuffers
import numpy as np


# The Unicode version of our tables on every Python: Python 3.11's unicodedata (14.0.0), the
# version the committed tables, fixtures and exported tokenizers were made with. Python 3.12
# and 3.13 ship 15.0.0 and 15.1.0, whose only differences from 14.0.0 are the codepoints they
# assigned (compared over every codepoint on all three: no assigned character changed its
# category, NFD or lower-case form). Those are unassigned (Cn) here on every Python, so a model
# tokenizes alike wherever it runs; otherwise an uncased model would strip the new combining
# mark U+0ECE on 3.12 but keep it on 3.11, and seven new format characters (U+13439..U+1343F)
# would vanish. tests/tokenization/test_unicode_version.py holds the tables to one digest.
UNICODE_VERSION = "14.0.0"
_PINNED_FROM = ("14.0.0", "15.0.0", "15.1.0")
# Codepoints assigned by Unicode 15.0 and 15.1 (inclusive ranges): Cn on Python 3.11, not on 3.13.
_ASSIGNED_AFTER_14 = (
    (0x0CF3, 0x0CF3),
    (0x0ECE, 0x0ECE),
    (0x2FFC, 0x2FFF),
    (0x31EF, 0x31EF),
    (0x10EFD, 0x10EFF),
    (0x1123F, 0x11241),
    (0x11B00, 0x11B09),
    (0x11F00, 0x11F10),
    (0x11F12, 0x11F3A),
    (0x11F3E, 0x11F59),
    (0x1342F, 0x1342F),
    (0x13439, 0x13455),
    (0x1B132, 0x1B132),
    (0x1B155, 0x1B155),
    (0x1D2C0, 0x1D2D3),
    (0x1DF25, 0x1DF2A),
    (0x1E030, 0x1E06D),
    (0x1E08F, 0x1E08F),
    (0x1E4D0, 0x1E4F9),
    (0x1F6DC, 0x1F6DC),
    (0x1F774, 0x1F776),
    (0x1F77B, 0x1F77F),
    (0x1F7D9, 0x1F7D9),
    (0x1FA75, 0x1FA77),
    (0x1FA87, 0x1FA88),
    (0x1FAAD, 0x1FAAF),
    (0x1FABB, 0x1FABD),
    (0x1FABF, 0x1FABF),
    (0x1FACE, 0x1FACF),
    (0x1FADA, 0x1FADB),
    (0x1FAE8, 0x1FAE8),
    (0x1FAF7, 0x1FAF8),
    (0x2B739, 0x2B739),
    (0x2EBF0, 0x2EE5D),
    (0x31350, 0x323AF),
)


@functools.cache
def _unassigned_in_pinned_version():
    if unicodedata.unidata_version not in _PINNED_FROM:
        raise RuntimeError(
            f"Python's unicodedata is Unicode {unicodedata.unidata_version}, but BERT's normalizer knows "
            f"how to pin Unicode {UNICODE_VERSION} from {', '.join(_PINNED_FROM)} only (Python 3.11 to "
            "3.13): run it on one of those, or add the newer version's assignments to "
            "bert_normalizer._ASSIGNED_AFTER_14"
        )
    return frozenset(cp for first, last in _ASSIGNED_AFTER_14 for cp in range(first, last + 1))


def category(char):
    """The general category of `char` in Unicode UNICODE_VERSION, whichever Python runs this."""
    return "Cn" if ord(char) in _unassigned_in_pinned_version() else unicodedata.category(char)


def is_whitespace(char):
    """BERT's whitespace: space, tab, newline, carriage return, the Unicode space separators (Zs)
    and the line and paragraph separators U+2028 (Zl) and U+2029 (Zp).

    Google's `_is_whitespace` names only Zs, but its cleaning keeps U+2028/2029 and its
    `whitespace_tokenize` (`str.split()`) then splits there, as Hugging Face's tokenizers do
    (Rust's `char::is_whitespace`). So they are made a space here: tensorflow-text's regex word
    splitter, which the vocabulary learner uses, takes them for letters, so the learner counted
    "good\u2028really" as one word and learned it, and FastBertTokenizer's WordPiece then matched
    such a token straight through the separator where Google and Hugging Face give two words.
    """
    return char in " \t\n\r" or category(char) in ("Zs", "Zl", "Zp")


def normalize_char(char, lowercase):
    """BERT's normalization of one character, as a string (maybe empty or several characters).

    Clean text (Google's `_clean_text`), then for uncased vocabularies NFD, drop
    Mn, lower-case (the order of Hugging Face's BertNormalizer; Google lower-cases
    first, which gives the same result for every codepoint; only Python's
    context-dependent final sigma, which Google's `str.lower()` applies to whole
    words, is never produced here or by Hugging Face).
    """
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD:
        return ""
    if is_whitespace(char):
        return " "
    kind = category(char)
    if kind in ("Cc", "Cf"):
        return ""
    if not lowercase or kind in ("Cn", "Co"):  # unassigned and private use: nothing to fold
        return char
    stripped = "".join(c for c in unicodedata.normalize("NFD", char) if category(c) != "Mn")
    return stripped.lower()


def _darts_clone_trie(keys, values):
    """A Darts-clone double-array trie (the layout tf-text's DartsCloneTrieWrapper reads).

    keys: distinct byte strings, none a prefix of another, without NUL bytes;
    values: ints in [0, 2**31). Returns the uint32 units.

    Unit layout: bits 10..31 the offset to the children (node ^ offset ^ byte is
    the child), bit 8 "has a value", bits 0..7 the byte that leads to the node;
    a value sits at node ^ offset (the byte-0 child) with bit 31 set. Every node
    gets its own base (node ^ offset), so a missing edge can never land on
    another parent's child with the same label.
    """
    root = _byte_trie(keys, values)
    units, used, used_bases = [0] * 1024, bytearray(1024), set()
    used[0] = 1  # the root
    queue, head, first_free = [(0, root)], 0, 256  # bases start at 256: slots below stay free
    while head < len(queue):
        pos, node = queue[head]
        head += 1
        labels = sorted(0 if k is None else k for k in node)
        base = _free_base(units, used, used_bases, first_free, labels)
        used_bases.add(base)
        offset = pos ^ base
        if offset >= 1 << 21:
            raise ValueError(f"Normalizer trie too large for Darts-clone offsets. Received: offset={offset}")
        units[pos] = (offset << 10) | (0x100 if None in node else 0) | (units[pos] & 0xFF)
        for key, child in node.items():
            if key is None:
                units[base] = 0x80000000 | child
                used[base] = 1
            else:
                units[base ^ key] = key
                used[base ^ key] = 1
                queue.append((base ^ key, child))
        first_free = used.find(0, first_free)
        if first_free < 0:
            first_free = len(used)
    return np.asarray(units[: len(used.rstrip(b"\x00"))], np.uint32)


def _byte_trie(keys, values):
    """Nested dicts byte -> child; a key's value sits under None at its last node."""
    root = {}
    for key, value in zip(keys, values):
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value
    return root


def _free_base(units, used, used_bases, first_free, labels):
    """The base of a node with children `labels` (sorted): the first free slot that can take the
    smallest label fixes it. Grows `units` and `used` as far as the base's 256 slots reach."""
    free = used.find(0, first_free)
    while True:
        if free < 0:
            free = len(used)
        base = free ^ labels[0]
        index = base | 0xFF
        if index >= len(used):
            extra = max(len(used), index + 1 - len(used))
            units.extend([0] * extra)
            used.extend(bytearray(extra))
        if base >= 256 and base not in used_bases and not any(used[base ^ label] for label in labels):
            return base
        free = used.find(0, free + 1)


@functools.lru_cache(maxsize=2)
def bert_normalizer_model(lowercase):
    """A tf-text FastBertNormalizer model (flatbuffer bytes) for `normalize_char`.

    `tf_text.FastBertNormalizer(model_buffer=bert_normalizer_model(True))`
    normalizes text exactly as BertPreprocessor does before splitting words.
    The table has an entry for every codepoint whose normalization is not
    itself (about 16,000 when uncased); building it takes about 0.3 s.
    """
    # Encoding of a mapped value (tf-text fast_bert_normalizer.h): bit 30 "differs
    # from the input", bits 6..29 the offset in the string pool, bits 0..5 the UTF-8 length.
    pool, where = bytearray(), {}

    def encode(mapped):
        data = mapped.encode("utf-8")
        if data and data not in where:
            where[data] = len(pool)
            pool.extend(data)
        return 0x40000000 | (where.get(data, 0) << 6) | len(data)

    keys, values = [], []
    identity = ("Cn", "Co", "Cs")
    for cp in range(1, 0x110000):
        char = chr(cp)
        # Surrogates have no UTF-8; unassigned and private-use codepoints (Cn, Co: neither space nor
        # control) map to themselves. Python's own table assigns no fewer than the pinned one, so its
        # Cn is Cn there too. Asking it first skips normalize_char for ~960,000 of the 1.1M: the
        # build takes a third of the time (every process that makes a preprocessor pays it once).
        if unicodedata.category(char) in identity:
            continue
        mapped = normalize_char(char, lowercase)
        if mapped != char:
            keys.append(char.encode("utf-8"))
            values.append(encode(mapped))
    zero = encode(normalize_char("\x00", lowercase))
    trie = _darts_clone_trie(keys, values)
    # table FastBertNormalizerModel { lower_case_nfd_strip_accents: bool; trie_array: [uint32];
    #   data_for_codepoint_zero: int32; normalized_string_pool: [ubyte]; }  (the kernel ignores the bool)
    builder = flatbuffers.Builder(4 * len(trie) + len(pool) + 1024)
    pool_offset = builder.CreateByteVector(bytes(pool))
    trie_offset = builder.CreateNumpyVector(trie.astype("<u4"))
    builder.StartObject(4)
    builder.PrependBoolSlot(0, bool(lowercase), False)
    builder.PrependUOffsetTRelativeSlot(1, trie_offset, 0)
    builder.PrependInt32Slot(2, zero, 0)
    builder.PrependUOffsetTRelativeSlot(3, pool_offset, 0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())
