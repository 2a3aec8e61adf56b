"""One NSP sentence pair before padding, and Google's pair truncation."""

import collections

PretrainingInstance = collections.namedtuple(
    "PretrainingInstance",
    ["token_ids", "segment_ids", "is_random_next", "masked_lm_positions", "masked_lm_ids"],
)
PretrainingInstance.__doc__ = """One packed pair before padding: `[CLS] A [SEP] B [SEP]` ids, its
segment ids, whether B is a random segment (NotNext), and the masked positions
with their original ids (empty when the builder does not mask)."""


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Google's `truncate_seq_pair`: trims the longer list (B on ties) one token
    at a time, from the front or the back at random, in place."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        # Both ends, so the model sees no bias toward sentence starts or ends.
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()
