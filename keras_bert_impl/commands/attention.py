"""`kbert attention`: pictures of a model's attention on one text or pair."""

import sys

from keras_bert_impl.commands.encoder_flags import MODEL_FLAG
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import add_command
from keras_bert_impl.commands.output_files import overwrite_flag, refuse_existing
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH


_HELP = "Draw a model's attention on a text: heatmaps (PNG) and an interactive HTML page."
_DESCRIPTION = (
    "Run the model on TEXT (and --pair TEXT_B) and draw the attention probabilities with the wordpieces "
    "on both axes: --layer and --head give one head large, --layer alone every head of that layer, "
    "neither a layer-by-head overview. --html writes a self-contained page (no network needed): choose "
    "the layer and head, hover a token to see its attention lines."
)
# (flag, add_argument keywords), in `--help`'s order.
_FLAG_TABLE = (
    ("text", dict(metavar="TEXT", help="The text (the first segment).")),
    (
        "--pair",
        dict(default=None, metavar="TEXT_B", help="A second segment, packed as [CLS] A [SEP] B [SEP]."),
    ),
    MODEL_FLAG,
    ("--layer", dict(type=int, default=None, help="0-based encoder layer (-1 = last).")),
    ("--head", dict(type=int, default=None, help="0-based head within --layer.")),
    ("--output", dict(default=None, help="PNG to write.")),
    ("--html", dict(default=None, help="Interactive HTML page to write.")),
    overwrite_flag("--output and --html files"),
    (
        "--seq-len",
        dict(
            type=int,
            default=DEFAULT_SEQUENCE_LENGTH,
            help="Wordpieces, [CLS] and [SEP]s included; longer is truncated. Default "
            f"{DEFAULT_SEQUENCE_LENGTH}.",
        ),
    ),
)


def add_parser(subparsers):
    return add_command(subparsers, "attention", run, _HELP, _DESCRIPTION, _FLAG_TABLE)


def run(args):
    _check_flags(args)
    from keras_bert_impl.commands.model_files import check_sequence_length, load_backbone
    from keras_bert_impl.inspection.attention_maps import AttentionMaps

    backbone, _ = load_backbone(args.model)
    check_sequence_length(args.seq_len, backbone, minimum=3 if args.pair is None else 4)
    for flag, value, count in (
        ("--layer", args.layer, backbone.num_layers),
        ("--head", args.head, backbone.num_heads),
    ):
        if value is not None and not -count <= value < count:
            raise UsageError(
                f"{flag} {value} is out of range: this model has {count} {flag[2:]}s (0 to {count - 1}, or "
                "-1 for the last)."
            )
    maps = AttentionMaps.compute(backbone, args.text, text_b=args.pair, sequence_length=args.seq_len)
    if maps.truncated:
        print(
            f"kbert attention: the text is longer than --seq-len {args.seq_len} wordpieces; the pictures "
            f"show its first {len(maps.tokens)}.",
            file=sys.stderr,
        )
    _write(args, maps)
    return 0


def _check_flags(args):
    refuse_existing(args, "output", "html")
    if not args.output and not args.html:
        raise UsageError("Say what to write: --output attention.png and/or --html attention.html.")
    if args.output and not args.output.lower().endswith(".png"):
        raise UsageError(f"--output must end in .png. Received: {args.output!r}")
    if args.html and not args.html.lower().endswith((".html", ".htm")):
        raise UsageError(f"--html must end in .html. Received: {args.html!r}")
    if args.head is not None and args.layer is None:
        raise UsageError("--head needs --layer (e.g. --layer 5 --head 3).")
    if not args.text.strip() and not (args.pair or "").strip():
        raise UsageError("TEXT is empty: give the text to look at.")


def _write(args, maps):
    from keras_bert_impl.inspection.attention_html import write_attention_html
    from keras_bert_impl.inspection.attention_plot import plot_attention

    if args.output:
        layer, head = plot_attention(maps, args.output, layer=args.layer, head=args.head)
        view = (
            "overview of every layer and head"
            if layer is None
            else f"every head of layer {layer}"
            if head is None
            else f"layer {layer}, head {head}"
        )
        print(f"Wrote {args.output} ({view}, {len(maps.tokens)} wordpieces)")
    if args.html:
        write_attention_html(maps, args.html, layer=-1 if args.layer is None else args.layer, head=args.head)
        print(f"Wrote {args.html} (open it in a browser; no network needed)")
