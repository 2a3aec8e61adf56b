"""One training run described as data: what `run_training` needs, and nothing about the order."""

import dataclasses
from typing import Any, Callable, Optional


@dataclasses.dataclass(kw_only=True)
class TrainingSpec:
    """A training run: the model builder, the data, the settings, what to save, the final metrics.

    `run_training(spec)` does the rest (`TrainingRun`): the run folder's rules, the strategy,
    the seed and dtype policy the model is built under, backup and exact resume, the best
    epoch's model, the saves and the closing record. `kbert finetune`, `distill` and
    `pretrain` each fill one from their flags; a Python user fills one the same way
    (docs/training.md). The functions are called in this order, each at most once: `strategy`
    (when a function), `data`, `model` (seeded, inside the strategy's scope), `final_metrics`,
    `files`. A finished run calls none of them.

    Args:
        output: the run folder's path.
        settings: dict of JSON values: what the run computes with. Recorded in run.json once:
            a rerun with other settings is refused, and a backup made by other settings (or
            another model config) is not restored.
        data: callable(`TrainingRun`) -> `TrainingData` (or any object with its four
            attributes and more: a command's own dataclass): reads and checks the data once
            the folder is checked. It may write into the folder through `run.output_path(name)`.
        model: callable(data) -> the compiled model `fit` trains. model.keras holds it, or
            its `inference_model` when it has one (a `Distiller`'s student).
        final_metrics: callable(`TrainingResult`) -> dict, written to metrics.json (the result
            carries the trained `model`, the `data` and the recorded `settings`).
        command: str. What trains in the folder (a folder made by another command is refused).
        inputs: dict of name -> input file or folder (or a list, or None): hashed, so an
            edited input is refused.
        best: (monitor, mode), e.g. ("val_accuracy", "max"): keep the best epoch's model; or a
            function of the data giving it (where the data decides: a teacher's task).
        files: callable(`TrainingResult`) -> dict of file name -> dict: more JSON files
            written beside model.keras.
        strategy: a `tf.distribute.Strategy`, a function making one (called after the folder
            check), or None for Keras' default placement (any backend).
        dtype_policy: Keras dtype policy the model is built and trained under (e.g.
            "mixed_bfloat16"), or None to leave the global one.
        seed: int. `keras.utils.set_random_seed` before the model is built.
        save_every: int. Steps between backups (and at each epoch end).
        verbose: `fit`'s verbose.
        overwrite: bool. Replace a run of other settings or inputs instead of refusing it.
        keep_backup: bool. Keep backup/ after the run finishes.
        name: str. The prefix of the lines the run prints (default "kbert COMMAND").
        callbacks: more Keras callbacks for `fit`.

    Example:
    >>> from keras_bert_impl.training import TrainingData, run_training
    >>> def build(data):  # seeded, inside the strategy's scope
    ...     model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    ...     model.compile(optimizer="sgd", loss="mse")
    ...     return model
    >>> batches = [(np.ones((2, 3)), np.zeros((2, 1)))]
    >>> spec = TrainingSpec(
    ...     output="run",
    ...     settings={"epochs": 2},
    ...     data=lambda run: TrainingData(dataset_fn=lambda: batches, epochs=2, steps_per_epoch=1),
    ...     model=build,
    ...     final_metrics=lambda result: {"loss": result.history["loss"][-1]},
    ...     verbose=0,
    ... )
    >>> sorted(run_training(spec).metrics), run_training(spec)  # the second call finds the run finished
    (['loss'], None)
    """

    output: str
    settings: dict
    data: Callable[[Any], Any]
    model: Callable[[Any], Any]
    final_metrics: Callable[[Any], dict]
    command: str = "train"
    inputs: Optional[dict] = None
    best: Any = None
    files: Optional[Callable[[Any], dict]] = None
    strategy: Any = None
    dtype_policy: Optional[str] = None
    seed: int = 0
    save_every: int = 200
    verbose: Any = "auto"
    overwrite: bool = False
    keep_backup: bool = False
    name: Optional[str] = None
    callbacks: tuple = ()
