"""Heatmaps of `AttentionMaps` as PNG files (matplotlib: the maintained standard for static
plots, already a dependency of the export report).

Three views: one head large with the wordpieces on both axes; every head of one layer in a
grid; every layer and head at once (a layer-by-head overview, for spotting patterns such as
heads that attend to [SEP] or to the previous token).
"""

import math

from keras_bert_impl.inspection.figures import new_figure, save_png


def _heatmap(axes, matrix, tokens, labels=True, title=None, fontsize=9):
    image = axes.imshow(matrix, cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
    if labels:
        axes.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=fontsize)
        axes.set_yticks(range(len(tokens)), tokens, fontsize=fontsize)
    else:
        axes.set_xticks([])
        axes.set_yticks([])
    if title:
        axes.set_title(title, fontsize=fontsize + 1)
    return image


def plot_attention(maps, path, layer=None, head=None, title=None):
    """Writes a PNG of `maps` (AttentionMaps) to `path`, atomically.

    layer and head given: that head large; layer only: every head of the layer; neither:
    the layer-by-head overview. Returns the (layer, head) plotted (None where all).
    """
    if head is not None and layer is None:
        raise ValueError("head needs a layer: pass layer too (e.g. layer=5, head=3).")
    layer = None if layer is None else maps.check_layer(layer)
    head = None if head is None else maps.check_head(head)
    count = len(maps.tokens)
    text = title or " ".join(maps.tokens)
    if head is not None:
        side = max(5.0, 0.32 * count + 2.0)
        figure = new_figure(side + 1.0, side)
        axes = figure.add_subplot(1, 1, 1)
        image = _heatmap(
            axes, maps.probabilities[layer, head], maps.tokens, title=f"layer {layer}, head {head}"
        )
        axes.set_xlabel("attended to")
        axes.set_ylabel("attending")
        figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04)
    elif layer is not None:
        columns = min(4, maps.num_heads)
        rows = math.ceil(maps.num_heads / columns)
        labels = count <= 24
        cell = max(3.0, 0.2 * count + 1.5) if labels else 3.0
        figure = new_figure(columns * cell, rows * cell + 0.6)
        for h in range(maps.num_heads):
            axes = figure.add_subplot(rows, columns, h + 1)
            _heatmap(
                axes, maps.probabilities[layer, h], maps.tokens, labels=labels, title=f"head {h}", fontsize=7
            )
        text = f"layer {layer}: {text}"
    else:
        figure = new_figure(maps.num_heads * 1.3 + 0.8, maps.num_layers * 1.3 + 0.8)
        for row in range(maps.num_layers):
            for h in range(maps.num_heads):
                axes = figure.add_subplot(maps.num_layers, maps.num_heads, row * maps.num_heads + h + 1)
                _heatmap(axes, maps.probabilities[row, h], maps.tokens, labels=False)
                if row == 0:
                    axes.set_title(f"head {h}", fontsize=8)
                if h == 0:
                    axes.set_ylabel(f"layer {row}", fontsize=8)
    figure.suptitle(text if len(text) <= 110 else text[:107] + "...", fontsize=10)
    figure.tight_layout(rect=(0, 0, 1, 0.97))  # room for the title above the panels
    save_png(figure, path)
    return layer, head
