"""2-D pictures of vectors: sentence vectors coloured by label, and one word's contextual
vectors across sentences. Projection by PCA (numpy's SVD: deterministic and dependency-free;
t-SNE and UMAP distort distances and add a dependency for a picture)."""

import numpy as np

from keras_bert_impl.inspection.figures import categorical_colours, new_figure, save_png

# A categorical colour map with this many distinguishable colours (matplotlib's tab20).
MAX_LABELS = 20


def pca_2d(vectors):
    """float [N, D] -> ([N, 2] projection on the top two principal components, the fraction
    of the variance each explains)."""
    vectors = np.asarray(vectors, np.float64)
    if vectors.ndim != 2 or len(vectors) < 2:
        raise ValueError(f"PCA needs at least 2 vectors as an [N, D] array. Received shape {vectors.shape}.")
    centred = vectors - vectors.mean(axis=0)
    _, singular, components = np.linalg.svd(centred, full_matrices=False)
    # A sign convention, so the same data always gives the same picture.
    signs = np.sign(components[:2, np.argmax(np.abs(components[:2]), axis=1)].diagonal())
    components = components[:2] * signs[:, None]
    variance = singular**2
    return centred @ components.T, variance[:2] / max(variance.sum(), 1e-12)


def plot_embeddings(vectors, labels, path, title="Sentence vectors (PCA)"):
    """Scatter of `vectors` [N, D] on their first two principal components, coloured by
    `labels` (N strings), written to `path` as PNG, atomically. Returns the label counts."""
    labels = [str(label) for label in labels]
    if len(labels) != len(vectors):
        raise ValueError(
            f"labels must give one label per vector. Received {len(labels)} labels for {len(vectors)} "
            "vectors."
        )
    names = sorted(set(labels))
    if len(names) > MAX_LABELS:
        raise ValueError(
            f"labels has {len(names)} distinct labels; a picture can tell at most {MAX_LABELS} colours apart."
        )
    points, explained = pca_2d(vectors)
    figure = new_figure(8, 7)
    axes = figure.add_subplot(1, 1, 1)
    cmap = categorical_colours(len(names))
    counts = {}
    for i, name in enumerate(names):
        chosen = np.array([label == name for label in labels])
        counts[name] = int(chosen.sum())
        axes.scatter(
            points[chosen, 0],
            points[chosen, 1],
            s=6,
            alpha=0.6,
            color=cmap(i),
            label=f"{name} ({counts[name]})",
        )
    axes.set_xlabel(f"PC 1 ({explained[0]:.1%} of the variance)")
    axes.set_ylabel(f"PC 2 ({explained[1]:.1%} of the variance)")
    axes.set_title(title)
    axes.legend(markerscale=3, fontsize=9)
    figure.tight_layout()
    save_png(figure, path)
    return counts


def plot_word_senses(vectors, contexts, word, path, groups=None, annotate=12):
    """The contextual vectors of `word` [M, H] on their first two principal components, each
    point labelled with a snippet of its sentence (`contexts`, M strings; about `annotate` in
    all, the first of each group, so the picture stays readable) and coloured by `groups` (M
    strings, e.g. a sense or a source) if given."""
    if len(contexts) != len(vectors):
        raise ValueError(
            f"contexts must give one sentence per vector. Received {len(contexts)} for {len(vectors)} "
            "vectors."
        )
    points, explained = pca_2d(vectors)
    figure = new_figure(10, 8)
    axes = figure.add_subplot(1, 1, 1)
    grouped = groups is not None
    groups = [str(g) for g in groups] if grouped else ["occurrence"] * len(vectors)
    names = sorted(set(groups))
    if len(names) > MAX_LABELS:
        raise ValueError(
            f"groups has {len(names)} distinct values; a picture can tell at most {MAX_LABELS} colours apart."
        )
    cmap = categorical_colours(len(names))
    for i, name in enumerate(names):
        chosen = np.array([g == name for g in groups])
        axes.scatter(points[chosen, 0], points[chosen, 1], s=30, alpha=0.8, color=cmap(i), label=name)
    # The first few points of every group get their sentence, so each colour is explained.
    per_group = -(-annotate // len(names)) if annotate else 0
    shown = [i for name in names for i in [j for j, g in enumerate(groups) if g == name][:per_group]]
    for i in shown:
        snippet = _snippet(contexts[i], word)
        axes.annotate(snippet, points[i], fontsize=7, alpha=0.85, xytext=(4, 3), textcoords="offset points")
    axes.set_xlabel(f"PC 1 ({explained[0]:.1%} of the variance)")
    axes.set_ylabel(f"PC 2 ({explained[1]:.1%} of the variance)")
    axes.set_title(f"Contextual vectors of {word!r} in {len(vectors)} sentences (PCA)")
    if grouped and len(names) > 1:
        axes.legend(fontsize=9)
    figure.tight_layout()
    save_png(figure, path)


def _snippet(sentence, word, width=28):
    """A few words either side of the first `word` in `sentence`."""
    lower = sentence.lower()
    at = lower.find(word.lower())
    if at < 0:
        return sentence[: 2 * width]
    start, end = max(0, at - width), min(len(sentence), at + len(word) + width)
    return ("..." if start else "") + sentence[start:end].strip() + ("..." if end < len(sentence) else "")


def nearest_neighbour_agreement(vectors, groups):
    """The fraction of vectors whose nearest other vector (cosine) has the same group: how well
    the groups separate in the full space, not only in the 2-D picture (leave-one-out 1-NN)."""
    vectors = np.asarray(vectors, np.float64)
    if len(vectors) != len(groups) or len(vectors) < 2:
        raise ValueError(
            f"Need one group per vector and at least 2 vectors. Received {len(vectors)} vectors, "
            f"{len(groups)} groups."
        )
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -np.inf)
    nearest = similarity.argmax(axis=1)
    groups = np.asarray(groups)
    return float(np.mean(groups[nearest] == groups))
