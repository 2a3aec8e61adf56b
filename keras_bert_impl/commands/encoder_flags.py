"""The flags `kbert embed` and `kbert index` share: how texts become vectors."""

import sys

from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.flag_types import positive_int
from keras_bert_impl.validation import DEFAULT_SEQUENCE_LENGTH

POOLING = ("cls", "mean", "max", "first-last-mean")  # keras_bert_impl.inspection.sentence_encoder.POOLING


# The model of every command that takes any BERT model (a backbone or a head on one).
MODEL_FLAG = (
    "--model",
    dict(
        required=True,
        help="A .keras model (kbert convert/pretrain/finetune), a run folder, or a checkpoint folder.",
    ),
)


def add_encoder_flags(parser, normalize_flag=True):
    parser.add_argument(MODEL_FLAG[0], **MODEL_FLAG[1])
    parser.add_argument(
        "--pooling",
        default="mean",
        choices=POOLING,
        help="cls: the [CLS] vector; mean / max: over the text's wordpieces; first-last-mean: the mean "
        "of layer 1's and the last layer's mean-pooled vectors. Default mean (all-MiniLM-L6-v2's recipe).",
    )
    parser.add_argument(
        "--layer",
        type=int,
        nargs="+",
        default=[-1],
        metavar="L",
        help="Layer(s) to pool: 0 = embeddings, i = encoder layer i, -1 = last (default), -2 = the one "
        "before; several are concatenated (bert-as-service's pooling_layer).",
    )
    if normalize_flag:
        parser.add_argument(
            "--normalize", action="store_true", help="L2-normalise every vector (cosine = dot product)."
        )
    parser.add_argument(
        "--seq-len",
        type=int,
        default=DEFAULT_SEQUENCE_LENGTH,
        help="Wordpieces per text, [CLS] and [SEP] included; longer "
        f"texts are truncated (counted once at the end). Default {DEFAULT_SEQUENCE_LENGTH}.",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=64, help="Texts per forward pass. Default 64."
    )


def encoder_from_args(args, normalize=None):
    """(SentenceEncoder, model description) for the flags of `add_encoder_flags`."""
    from keras_bert_impl.commands.model_files import check_sequence_length, load_backbone
    from keras_bert_impl.inspection.sentence_encoder import SentenceEncoder

    backbone, description = load_backbone(args.model)
    check_sequence_length(args.seq_len, backbone)
    if getattr(args, "precision", None) is not None:  # kbert embed's --precision: ForwardResolver's to decide
        from keras_bert_impl.commands.inference_setup import resolve_flags

        backbone = resolve_flags(args, backbone, "embedding").model_in_precision()
    layers = tuple(args.layer)
    if args.pooling == "first-last-mean" and layers != (-1,):
        raise UsageError(
            "--pooling first-last-mean pools layer 1 and the last layer itself: leave out --layer."
        )
    for layer in layers:
        if not -(backbone.num_layers + 1) <= layer <= backbone.num_layers:
            raise UsageError(
                f"--layer {layer} is out of range for this {backbone.num_layers}-layer model: use 0 "
                f"(embeddings) to {backbone.num_layers}, or -1 (last) to {-(backbone.num_layers + 1)}."
            )
    encoder = SentenceEncoder(
        backbone,
        pooling=args.pooling,
        layers=layers,
        normalize=args.normalize if normalize is None else normalize,
        sequence_length=args.seq_len,
        batch_size=args.batch_size,
    )
    return encoder, description


def progress_bar(total, command):
    """A callback drawing a progress bar on a terminal (nothing when stderr is a file or pipe)."""
    if not sys.stderr.isatty():
        return None
    import keras

    bar = keras.utils.Progbar(total, unit_name="text")
    return lambda done: bar.update(done)


def report_truncated(encoder, total, command):
    if encoder.truncated:
        print(
            f"kbert {command}: {encoder.truncated} of {total} texts were longer than --seq-len "
            f"{encoder.sequence_length} wordpieces and were truncated.",
            file=sys.stderr,
        )
