"""`kbert distill`'s student and Distiller from the flags (inside the run's strategy scope)."""

from keras_bert_impl.commands.distill_flags import layer_map_text
from keras_bert_impl.commands.errors import UsageError
from keras_bert_impl.commands.training_flags import compile_for_training


def task_models(args, teacher, teacher_path, data, train_steps):
    """The student head on its backbone and the compiled Distiller (inside the run's scope)."""
    backbone, init = _student_backbone(args, teacher.backbone)
    if teacher.pooling == "mean":
        backbone.pooler.trainable = False  # the head reads the token vectors only
    student = type(teacher)(
        backbone,
        num_classes=teacher.num_classes,
        label_names=data.label_names,
        multi_label=teacher.multi_label,
        dropout=args.dropout,
        pooling=teacher.pooling,
    )
    distiller = _distiller(
        args,
        teacher,
        student,
        teacher.backbone,
        backbone,
        teacher_path,
        temperature=args.temperature,
        alpha=args.alpha,
    )
    compile_for_training(distiller, args, train_steps)
    return student, distiller, init


def general_models(args, teacher, train_steps):
    """The student backbone and the compiled Distiller of two encoders (inside the run's scope)."""
    student, init = _student_backbone(args, teacher)
    # No term reads the pooler: frozen while distilling (no optimizer moments, no Keras
    # warning about missing gradients), trainable again in the saved encoder.
    student.pooler.trainable = False
    distiller = _distiller(args, teacher, student, teacher, student, args.teacher, alpha=0.0)
    compile_for_training(distiller, args, train_steps)
    return student, distiller, init


def _distiller(args, teacher, student, teacher_backbone, student_backbone, teacher_path, **logits):
    from keras_bert_impl.models import DistillationArgumentError, Distiller

    try:
        return Distiller(
            teacher,
            student,
            layer_map=args.layer_map,
            hidden_weight=args.hidden_weight,
            attention_weight=args.attention_weight,
            embedding_weight=args.embedding_weight,
            **logits,
        )
    except DistillationArgumentError as e:
        raise _distiller_error(e, args, student_backbone, teacher_backbone, teacher_path) from None


def _student_backbone(args, teacher_backbone):
    import keras_bert_impl as kb
    from keras_bert_impl.models import backbone_from_layers, embeddings_from_teacher

    if args.student_init:
        from keras_bert_impl.commands.model_files import load_backbone

        backbone, description = load_backbone(args.student_init, "--student-init")
        if (
            list(backbone.vocabulary) != list(teacher_backbone.vocabulary)
            or backbone.lowercase != teacher_backbone.lowercase
        ):
            raise UsageError(
                f"--student-init {args.student_init} tokenizes with another vocabulary than the teacher "
                f"({len(backbone.vocabulary)} vs {len(teacher_backbone.vocabulary)} tokens, lowercase "
                f"{backbone.lowercase} vs {teacher_backbone.lowercase}): the same ids would mean different "
                "tokens. Start from a student distilled from this teacher's encoder (kbert distill --general)."
            )
        return backbone, f"{description}"
    if args.student_from_teacher:
        layers = _layers(args.student_from_teacher)
        try:
            return backbone_from_layers(teacher_backbone, layers), f"teacher layers {layers}"
        except ValueError as e:
            raise UsageError(f"--student-from-teacher {args.student_from_teacher}: {e}") from None
    if args.student_preset not in kb.BERT_PRESETS:
        raise UsageError(
            f"--student-preset {args.student_preset!r} is not a preset. Choose one of: "
            f"{', '.join(sorted(kb.BERT_PRESETS))}."
        )
    backbone = kb.BertBackbone.from_preset(
        args.student_preset,
        vocabulary_size=teacher_backbone.vocabulary_size,
        max_sequence_length=teacher_backbone.max_sequence_length,
    )
    backbone.set_vocabulary(teacher_backbone.vocabulary, teacher_backbone.lowercase)
    if args.student_embeddings == "random":
        return backbone, f"{args.student_preset}, random"
    if backbone.hidden_dim > teacher_backbone.hidden_dim:
        raise UsageError(
            f"--student-preset {args.student_preset} is wider (hidden_dim {backbone.hidden_dim}) than the "
            f"teacher ({teacher_backbone.hidden_dim}): its embeddings cannot start from the teacher's; "
            "pass --student-embeddings random or a narrower preset."
        )
    kept = embeddings_from_teacher(teacher_backbone, backbone)
    return (
        backbone,
        f"{args.student_preset}, embeddings from the teacher's by PCA ({100 * kept:.1f}% of the variance)",
    )


def _layers(value):
    try:
        layers = [int(part) for part in value.split(",")]
    except ValueError:
        raise UsageError(
            f"--student-from-teacher takes comma-separated layer indices, e.g. 0,2,4. Received: {value!r}"
        ) from None
    return layers


def _distiller_error(error, args, student, teacher, teacher_path):
    """A Distiller's DistillationArgumentError as a UsageError naming the flag of the
    argument it names (its depth and head checks); `student`, `teacher`: the backbones."""
    depths = f"a {student.num_layers}-layer student of a {teacher.num_layers}-layer teacher"
    if error.argument == "layer_map":
        return UsageError(f"--layer-map {layer_map_text(args.layer_map)} for {depths}: {error}")
    if error.argument == "attention_weight":
        return UsageError(f"--attention-weight {args.attention_weight} for {depths}: {error}")
    return UsageError(f"--teacher {teacher_path} and the student: {error}")
