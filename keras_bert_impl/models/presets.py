"""Architecture presets, as data. Random init only: nothing is downloaded.

Google's 24 compact BERTs (Turc et al., 2019: L in {2,4,6,8,10,12} x H in
{128,256,512,768}, A = H/64, I = 4H) plus BERT-base and BERT-large. Google
named four of the grid (tiny, mini, small, medium) and the paper names base
and large; the other 19 grid points have no published name, so they are
called `bert_l{L}_h{H}` after their place in the grid.
"""

_SHARED = {"vocabulary_size": 30522, "max_sequence_length": 512, "num_segments": 2}

_NAMED = {
    (2, 128): "bert_tiny",
    (4, 256): "bert_mini",
    (4, 512): "bert_small",
    (8, 512): "bert_medium",
    (12, 768): "bert_base",
}


def _grid():
    presets = {}
    for num_layers in (2, 4, 6, 8, 10, 12):
        for hidden_dim in (128, 256, 512, 768):
            name = _NAMED.get((num_layers, hidden_dim), f"bert_l{num_layers}_h{hidden_dim}")
            presets[name] = {
                **_SHARED,
                "num_layers": num_layers,
                "hidden_dim": hidden_dim,
                "num_heads": hidden_dim // 64,
                "intermediate_dim": 4 * hidden_dim,
            }
    return presets


BERT_PRESETS = {
    **_grid(),
    "bert_large": {
        **_SHARED,
        "num_layers": 24,
        "hidden_dim": 1024,
        "num_heads": 16,
        "intermediate_dim": 4096,
    },
}
