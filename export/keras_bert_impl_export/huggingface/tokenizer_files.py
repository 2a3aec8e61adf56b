"""The tokenizer files of a transformers folder: vocab.txt, tokenizer_config.json,
special_tokens_map.json and tokenizer.json (Hugging Face's `tokenizers`, the file
`AutoTokenizer` loads as the fast tokenizer)."""

import json

from keras_bert_impl.tokenization import SPECIAL_TOKENS, duplicate_tokens
from keras_bert_impl_export.huggingface.not_expressible_error import NotExpressibleError

# BertPreprocessor's default, and the value of Hugging Face's BERT tokenizers.
MAX_CHARS_PER_WORD = 100
_ROLES = {
    "[PAD]": "pad_token",
    "[UNK]": "unk_token",
    "[CLS]": "cls_token",
    "[SEP]": "sep_token",
    "[MASK]": "mask_token",
}


def _tokenizer_json(vocabulary, lowercase):
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    ids = {token: i for i, token in enumerate(vocabulary)}
    tokenizer = Tokenizer(
        models.WordPiece(ids, unk_token="[UNK]", max_input_chars_per_word=MAX_CHARS_PER_WORD)
    )
    # strip_accents=None follows lowercase, as BertPreprocessor does (uncased strips accents).
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=bool(lowercase)
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return tokenizer.to_str(pretty=False)


def tokenizer_files(vocabulary, lowercase, model_max_length):
    """{file name: text} of the tokenizer of a vocabulary and casing.

    Args:
        vocabulary: the WordPiece tokens in id order (the model's `backbone.vocabulary`).
        lowercase: bool: the model's casing (`backbone.lowercase`).
        model_max_length: the longest input, max_position_embeddings.
    """
    duplicates = duplicate_tokens(vocabulary)
    if duplicates:
        raise NotExpressibleError(
            f"the vocabulary holds duplicate tokens ({', '.join(map(repr, duplicates[:3]))}); a Hugging Face "
            "tokenizer maps a token to one id: rebuild the vocabulary without duplicates."
        )
    special = {role: token for token, role in _ROLES.items()}
    config = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": bool(lowercase),
        "strip_accents": None,
        "tokenize_chinese_chars": True,
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,
        **special,
    }
    return {
        "vocab.txt": "".join(token + "\n" for token in vocabulary),
        "tokenizer_config.json": json.dumps(config, indent=2) + "\n",
        "special_tokens_map.json": json.dumps(special, indent=2) + "\n",
        "tokenizer.json": _tokenizer_json(vocabulary, lowercase),
    }
