"""matplotlib figures without pyplot's global state (nothing leaks between plots or threads),
saved atomically as PNG."""

from keras_bert_impl.atomic_write import write_atomically


def new_figure(width, height):
    """A matplotlib Figure of `width` x `height` inches at 100 dpi, on the Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def save_png(figure, path):
    write_atomically(path, lambda tmp: figure.savefig(tmp, format="png"), suffix=".png")


def categorical_colours(count):
    """A colour map telling `count` (<= 20) categories apart."""
    from matplotlib import colormaps

    return colormaps["tab10" if count <= 10 else "tab20"]
