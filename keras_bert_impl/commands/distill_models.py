"""`kbert distill`'s student and Distiller from the checked flags (inside the run's strategy scope)."""

from keras_bert_impl.commands.distill_flags import distill_terms, layer_map_text
from keras_bert_impl.commands.errors import UsageError


def distill_models(args, teacher, train_steps, label_names=None):
    """The student (a head like the teacher's, or a backbone for a backbone teacher: general
    distillation) and the compiled Distiller of the flags' terms, and the student's story."""
    import keras_bert_impl as kb
    from keras_bert_impl.commands.training_flags import compile_for_training

    encoder = isinstance(teacher, kb.BertBackbone)
    teacher_backbone = teacher if encoder else teacher.backbone
    backbone, init = _student_backbone(args, teacher_backbone)
    if encoder or teacher.pooling == "mean":
        # No term (or head) reads the pooler: frozen while distilling (no optimizer moments,
        # no Keras warning about missing gradients), trainable again in a saved encoder.
        backbone.pooler.trainable = False
    student = backbone
    if not encoder:
        head = dict(num_classes=teacher.num_classes, multi_label=teacher.multi_label, pooling=teacher.pooling)
        student = type(teacher)(backbone, label_names=label_names, dropout=args.dropout, **head)
    try:
        distiller = kb.Distiller(teacher, student, distill_terms(args))
    except kb.DistillationArgumentError as e:
        raise _refusal(e, args, backbone, teacher_backbone) from None
    compile_for_training(distiller, args, train_steps)
    return student, distiller, init


def _refusal(error, args, student, teacher):
    """The terms' checks against the two backbones (depths, head counts) as one line naming the flag."""
    depths = f"a {student.num_layers}-layer student of a {teacher.num_layers}-layer teacher"
    if error.argument == "layer_map":
        return UsageError(f"--layer-map {layer_map_text(args.layer_map)} for {depths}: {error}")
    if error.argument == "attention_weight":
        return UsageError(f"--attention-weight {args.attention_weight} for {depths}: {error}")
    return UsageError(f"--teacher {args.teacher} and the student: {error}")


def _student_backbone(args, teacher):
    """The student encoder of --student-init, --student-from-teacher or --student-preset, and
    how it was made."""
    from keras_bert_impl.models import backbone_from_layers

    if args.student_init:
        from keras_bert_impl.commands.model_files import load_backbone

        backbone, description = load_backbone(args.student_init, "--student-init")
        if list(backbone.vocabulary) != list(teacher.vocabulary) or backbone.lowercase != teacher.lowercase:
            raise UsageError(
                f"--student-init {args.student_init} tokenizes with another vocabulary than the teacher "
                f"({len(backbone.vocabulary)} vs {len(teacher.vocabulary)} tokens, lowercase "
                f"{backbone.lowercase} vs {teacher.lowercase}): the same ids would mean different tokens. "
                "Start from a student distilled from this teacher's encoder (kbert distill --general)."
            )
        return backbone, description
    if args.student_from_teacher:
        try:
            layers = [int(part) for part in args.student_from_teacher.split(",")]
        except ValueError:
            raise UsageError(
                "--student-from-teacher takes comma-separated layer indices, e.g. 0,2,4. Received: "
                f"{args.student_from_teacher!r}"
            ) from None
        try:
            return backbone_from_layers(teacher, layers), f"teacher layers {layers}"
        except ValueError as e:
            raise UsageError(f"--student-from-teacher {args.student_from_teacher}: {e}") from None
    return _preset_backbone(args, teacher)


def _preset_backbone(args, teacher):
    """A --student-preset encoder with the teacher's vocabulary, its embeddings the teacher's
    projected (or random)."""
    import keras_bert_impl as kb
    from keras_bert_impl.models import embeddings_from_teacher

    if args.student_preset not in kb.BERT_PRESETS:
        raise UsageError(
            f"--student-preset {args.student_preset!r} is not a preset. Choose one of: "
            f"{', '.join(sorted(kb.BERT_PRESETS))}."
        )
    backbone = kb.BertBackbone.from_preset(
        args.student_preset,
        vocabulary_size=teacher.vocabulary_size,
        max_sequence_length=teacher.max_sequence_length,
    )
    backbone.set_vocabulary(teacher.vocabulary, teacher.lowercase)
    if args.student_embeddings == "random":
        return backbone, f"{args.student_preset}, random"
    if backbone.hidden_dim > teacher.hidden_dim:
        raise UsageError(
            f"--student-preset {args.student_preset} is wider (hidden_dim {backbone.hidden_dim}) than the "
            f"teacher ({teacher.hidden_dim}): its embeddings cannot start from the teacher's; "
            "pass --student-embeddings random or a narrower preset."
        )
    kept = embeddings_from_teacher(teacher, backbone)
    return (
        backbone,
        f"{args.student_preset}, embeddings from the teacher's by PCA ({100 * kept:.1f}% of the variance)",
    )
