"""A distillation as a `TrainingSpec`: the student and its `Distiller` built from the data's
teacher, the final metrics, the best epoch and the record of the run."""

import sys

from keras_bert_impl.evaluation import compute_metrics
from keras_bert_impl.models import BertBackbone, DistillationArgumentError, Distiller, student_model
from keras_bert_impl.models import best_monitor
from keras_bert_impl.training.training_spec import TrainingSpec


def distillation_spec(
    *, data, student, terms, compile, dropout=0.1, facts_file=None, metrics=None, **options
):
    """The `TrainingSpec` of a distillation (`run_training` trains it): the `model` it builds
    is a `Distiller` of the data's teacher and a student made from the teacher's encoder
    (`student_model`: a head like the teacher's on it, or the encoder itself for a
    `BertBackbone` teacher, general distillation), reported on stderr; its final metrics are
    the run's history and times, the two models' sizes and, for a head, both models' scores on
    the validation data; a head's best epoch is kept (`best_monitor`).

    Args:
        data: callable(`TrainingRun`) -> the run's data: a `keras_bert_impl.data.TransferSet`,
            or any object with its fields `teacher`, `task` and `reader` (a head's validation
            is scored with them), `facts` and `TrainingData`'s four.
        student: callable(teacher encoder) -> (student encoder, how it was made, in words),
            e.g. a partial of `student_backbone`; called inside the run's scope.
        terms: callable() -> the `Distiller`'s terms, e.g. a partial of `distillation_terms`.
        compile: callable(distiller, train_steps) that compiles the `Distiller`.
        dropout: the student head's dropout.
        facts_file: the name of a JSON file beside model.keras for what the run records of its
            settings and data (`data.facts`, the layer map); None: metrics.json holds them.
        metrics: dict of more JSON values for metrics.json.
        options: `TrainingSpec`'s other arguments (output, settings, name, strategy, ...).

    A `DistillationArgumentError` raised while the `Distiller` is built carries `models`, the
    two depths in words, beside its `argument`.

    Example:
    >>> spec = distillation_spec(data=None, student=None, terms=list, compile=None, output="run", settings={})
    >>> spec.name, spec.files
    (None, None)
    """
    name = options.get("name") or f"kbert {options.get('command', 'train')}"

    def model(data):
        teacher = data.teacher
        encoder = teacher if isinstance(teacher, BertBackbone) else teacher.backbone
        backbone, how = student(encoder)
        try:
            distiller = Distiller(teacher, student_model(teacher, backbone, dropout), terms())
        except DistillationArgumentError as e:
            e.models = f"a {backbone.num_layers}-layer student of a {encoder.num_layers}-layer teacher"
            raise
        compile(distiller, data.steps_per_epoch * data.epochs)
        mapped = f"; layer map {distiller.mapped_layers}" if encoder is teacher else ""
        sizes = f"{distiller.student.count_params():,} parameters (teacher {teacher.count_params():,})"
        print(f"{name}: student {how}: {sizes}{mapped}", file=sys.stderr)
        return distiller

    def facts(result):
        return {**result.settings, **result.data.facts, "layer_map": result.trained.mapped_layers}

    def final_metrics(result):
        student, data = result.model, result.data
        ran = ("history", "resumed_from_step", "epoch_train_seconds", "seconds")
        sizes = {"student": student.count_params(), "teacher": data.teacher.count_params()}
        done = {**{key: getattr(result, key) for key in ran}, "parameters": sizes, **(metrics or {})}
        if isinstance(student, BertBackbone):
            student.pooler.trainable = True  # frozen while no term read it; trainable in the saved encoder
        if data.task is None:
            return {**done, **({} if facts_file else facts(result))}
        labels = list(data.teacher.label_names)
        scores = {
            key: compute_metrics(data.task, model, data.reader, data.validation, labels)
            for key, model in (("validation", student), ("teacher_validation", data.teacher))
        }
        return {**done, **scores, "best": result.best, **({} if facts_file else facts(result))}

    return TrainingSpec(
        **options,
        data=data,
        model=model,
        final_metrics=final_metrics,
        best=lambda data: data.task and best_monitor(data.task),
        files=facts_file and (lambda result: {facts_file: facts(result)}),
    )
