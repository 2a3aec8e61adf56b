"""The one place that decides how a loaded model runs: given the model, a precision (fp32, bf16,
int8 or auto) and a runtime (tensorflow, litert or None), the precision and runtime it runs at and
what runs them, or one line refusing the combination and naming what to use instead.

`kbert predict`, `evaluate`, `serve` and `embed`, `TextPredictor` and the benches ask it; nothing
else decides. What it accepts:

- A float classifier (classification, pair, multilabel): fp32 on tensorflow (the Keras model, in
  `OneDnnForms` where they compute its function) or litert (its float32 conversion on XNNPACK,
  `LiteRtForward`), bf16 on tensorflow (`with_precision`'s mixed_bfloat16 copy), int8 on litert
  (dynamic-range int8, `LiteRtForward`). auto: `precision_choice.choose_precision`.
- A token or span head, or an embedder: fp32 or bf16 on tensorflow; int8 and litert are refused
  (their conversions are not run here). auto: choose_precision (never int8).
- A model Keras quantized with model.quantize: as saved (fp32's row, on tensorflow); any other
  precision or litert refused, naming the float model. auto: as saved.
- A `QuantizationAwareClassifier` (`kbert finetune --qat`): fp32 on tensorflow is its own
  fake-quantized forward, what it trained through; int8 on litert is its integer-only file
  (`IntegerFileForward`, the ranges it learned), the file `kbert export` writes for the phone.
  bf16 is refused: a bfloat16 copy of its float classifier would drop the int8 ranges it learned,
  so it would run neither what it trained nor what the phone runs. fp32 on litert is refused for
  the same reason (it would be the float classifier). auto: int8 where the CPU has VNNI or AVX2 (as
  for any classifier) and the ranges were trained, else fp32; its one line says which forward.
"""

from keras_bert_impl.precision_choice import (
    AUTO,
    INT8_TASKS,
    NO_INT8_GAIN,
    choose_precision,
    int8_reason,
    slower_here,
)
from keras_bert_impl.precisions import (
    LITERT_QUANTIZATION,
    PRECISIONS,
    RUNTIME_NAMES,
    RUNTIMES,
    check_precision,
    check_runtime,
)
from keras_bert_impl.tasks import TASKS as HEAD_TASKS

TASKS = HEAD_TASKS + ("embedding",)


class ForwardResolver:
    """How `model` runs at `precision` on `runtime`; a ValueError of one line where it does not.

    Args:
        model: a loaded model of this library: a BertClassifier, BertTokenClassifier,
            BertSpanLabeler, BertEmbedder or BertBackbone (an embedder), a
            QuantizationAwareClassifier, or any of them quantized by Keras' model.quantize.
        precision: "fp32", "bf16", "int8" or "auto" (chosen for this CPU and the model).
        runtime: "tensorflow", "litert" or None (the precision's own: litert for int8, else
            tensorflow). With "auto" only None: auto picks the precision and its runtime.
        task: the model's task (one of TASKS); default: the model's own ("pair" is told, as
            it is a classifier reading two texts).
        features: a `CpuFeatures` for auto and for the note on an explicit bf16 or int8;
            default this machine's, read when needed.
        precision_name, runtime_name: what the messages call the two arguments (the commands
            pass their flags, "--precision" and "--runtime").

    Attributes:
        precision: "fp32", "bf16" or "int8": what runs (auto's choice).
        runtime: "tensorflow" or "litert".
        runs: "keras" (the Keras model in `precision`: `model_in_precision()`), "litert" (its
            conversion, `LiteRtForward`) or "integer_file" (a QAT model's `IntegerFileForward`).
        note: None, or one line for the user: what auto chose and why, or that an explicit
            bf16 or int8 is expected to be slower than fp32 on this CPU.

    Example:
    >>> backbone = kb.BertBackbone.from_preset("bert_tiny", vocabulary_size=100)
    >>> model = kb.BertClassifier(backbone, num_classes=2)
    >>> from keras_bert_impl.cpu_features import CpuFeatures
    >>> vnni = CpuFeatures("a CPU", ["avx2", "avx512f", "avx512_vnni"])
    >>> resolved = ForwardResolver(model, "auto", features=vnni)
    >>> resolved.precision, resolved.runtime, resolved.runs
    ('int8', 'litert', 'litert')
    >>> ForwardResolver(model, "bf16", runtime="litert")
    Traceback (most recent call last):
    ...
    ValueError: runtime litert runs precision fp32 or int8; bf16 runs on tensorflow only. ...
    """

    def __init__(
        self,
        model,
        precision,
        runtime=None,
        task=None,
        features=None,
        precision_name="precision",
        runtime_name="runtime",
    ):
        from keras_bert_impl.models.quantization_aware_classifier import QuantizationAwareClassifier
        from keras_bert_impl.models.quantized_layers import quantization_modes

        self._pn, self._rn = precision_name, runtime_name
        self.requested = check_precision(precision, PRECISIONS + (AUTO,), name=precision_name)
        if runtime is not None and runtime not in RUNTIME_NAMES:
            raise ValueError(
                f"{runtime_name} must be one of {list(RUNTIME_NAMES)}. Received: {runtime_name}={runtime!r}"
            )
        self.model = model
        self.task = _task_of(model) if task is None else task
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {list(TASKS)}. Received: task={self.task!r}")
        self.quantized = quantization_modes(model)
        self.quantization_aware = isinstance(model, QuantizationAwareClassifier)
        self._features = features
        self._note = None
        if self.requested == AUTO:
            if runtime is not None:
                raise ValueError(
                    f"{runtime_name} {runtime} goes with an explicit {precision_name} (auto picks the "
                    f"precision and runs it on its own runtime): pass {precision_name} fp32 {runtime_name} "
                    f"litert, or leave {runtime_name} out."
                )
            self.precision, self._note = self._auto()
            self.runtime = RUNTIMES[self.precision][0]
        else:
            self.precision = self.requested
            self.runtime = check_runtime(
                self.precision, runtime, name=runtime_name, precision_name=precision_name
            )
            self._refuse()
        if self.quantization_aware and self.precision == "int8":
            self.runs = "integer_file"
        else:
            self.runs = "litert" if self.runtime == "litert" else "keras"

    @property
    def features(self):
        if self._features is None:
            from keras_bert_impl.cpu_features import CpuFeatures

            self._features = CpuFeatures.of_this_machine()
        return self._features

    @property
    def note(self):
        """auto's line, or for an explicit bf16 or int8 the line saying it is expected to be
        slower than fp32 here (None where it is not): read /proc/cpuinfo only when asked."""
        if self._note is None and self.requested != AUTO and self.precision != "fp32":
            slower = slower_here(self.precision, self.features)
            if slower:
                self._note = (
                    f"{self._pn} {self.precision} is expected to be slower than fp32 here: {slower}; "
                    f"running {self.precision} as asked."
                )
        return self._note

    def _auto(self):
        pn, features = self._pn, self.features
        if self.quantized:
            return "fp32", (
                f"{pn} auto: the model as saved (quantized {', '.join(self.quantized)} with Keras' "
                "model.quantize)."
            )
        if self.quantization_aware:
            trained = not self.model.ranges.untrained()
            int8 = int8_reason(features)
            if int8 and trained:
                precision = "int8"
                reason = (
                    f"{int8}: int8 runs this quantization-aware model's integer-only file, with the "
                    "ranges it learned"
                )
            else:
                precision = "fp32"
                why = NO_INT8_GAIN if trained else "its activation ranges were never trained"
                reason = (
                    f"{why}: fp32 runs this quantization-aware model's own fake-quantized forward on "
                    "tensorflow, what it trained (bf16 would drop its int8 ranges)"
                )
        else:
            precision, reason = choose_precision(features, self.task)
        return precision, f"{pn} auto: {precision} on {features.describe()}, because {reason}."

    def _refuse(self):
        """One line for an explicit precision and runtime this model does not run."""
        pn, rn, precision, runtime = self._pn, self._rn, self.precision, self.runtime
        if self.quantized and precision != "fp32":
            raise ValueError(
                f"{pn} {precision} needs a float model; this one was quantized "
                f"({', '.join(self.quantized)}) with Keras' model.quantize. Leave {pn} out to run it as "
                "saved, or pass the float model."
            )
        if self.quantized and runtime == "litert":
            raise ValueError(
                f"{rn} litert needs a float model; this one was quantized ({', '.join(self.quantized)}) "
                f"with Keras' model.quantize and runs as saved on tensorflow. Leave {rn} out, or pass the "
                "float model."
            )
        if self.quantization_aware:
            if precision == "bf16":
                raise ValueError(
                    f"{pn} bf16 would run a bfloat16 copy of this quantization-aware model's float "
                    f"classifier, neither what it trained nor its int8 file: use {pn} int8 (its "
                    f"integer-only file, on litert) or {pn} fp32 (its fake-quantized forward, on "
                    "tensorflow)."
                )
            if precision == "fp32" and runtime == "litert":
                raise ValueError(
                    f"{rn} litert would run this quantization-aware model's float classifier, not what it "
                    f"trained: use {pn} int8 (its integer-only file, on litert), or leave {rn} out (its "
                    "fake-quantized forward, on tensorflow)."
                )
            untrained = self.model.ranges.untrained()
            if precision == "int8" and untrained:
                raise ValueError(
                    f"{pn} int8 runs this quantization-aware model's integer-only file, which needs the "
                    f"activation ranges it learns in training; {len(untrained)} were never trained: fit it "
                    f"first (kbert finetune --qat), or use {pn} fp32."
                )
            return
        if self.task in INT8_TASKS:
            return
        if precision == "int8":
            raise ValueError(
                f"{pn} int8 runs classification, pair and multilabel models; this model's task is "
                f"{self.task}. Use {pn} fp32 or bf16."
            )
        if runtime == "litert":
            raise ValueError(
                f"{rn} litert runs classification, pair and multilabel models; this model's task is "
                f"{self.task}. Leave {rn} out."
            )

    def model_in_precision(self):
        """The Keras model that runs where `runs` is "keras": the model itself in fp32 (a
        QuantizationAwareClassifier: its fake-quantized forward; a Keras-quantized one: as
        saved), its mixed_bfloat16 copy in bf16. Elsewhere the model that is converted."""
        if self.precision != "bf16":
            return self.model
        from keras_bert_impl.inference.precision import with_precision

        return with_precision(self.model, "bf16")

    def forward(self, sequence_length=None):
        """`(token_ids, segment_ids, padding_mask) -> {output: values [B, ...]}` on int32 [B, T]
        batches (T free) of a sequence-level model: an `LiteRtForward` (litert), an
        `IntegerFileForward` (a QAT model's int8: `sequence_length`, its file's static length,
        is required), or a `tf.function` of the Keras model in its precision. A conversion that
        fails is a `ConversionError` of one line naming the precision and what to run instead."""
        if self.runs == "keras":
            return _keras_forward(self.model_in_precision(), self.precision)
        from keras_bert_impl.conversion.tflite_converter import ConversionError

        try:
            return self._litert_forward(sequence_length)
        except ConversionError as e:
            # The converter's advice is about kbert export's flags; what to run instead is ours.
            reason = str(e).split(". ")[0]
            raise ConversionError(
                f"{self._pn} {self.precision} on {self.runtime}: this model did not convert "
                f"({reason}); run it with {self._pn} fp32 on tensorflow."
            ) from None

    def _litert_forward(self, sequence_length):
        if self.runs == "integer_file":
            from keras_bert_impl.inference.integer_file_forward import IntegerFileForward

            if sequence_length is None:
                raise ValueError("The integer-only file is static: give forward(sequence_length=...).")
            return IntegerFileForward(self.model, sequence_length)
        from keras_bert_impl.inference.litert_forward import LiteRtForward
        from keras_bert_impl.inference.precision import with_precision

        # TFLite converts a float32 graph: a model computing in bfloat16 or float16 is rebuilt first.
        return LiteRtForward(
            with_precision(self.model, "fp32"), quantization=LITERT_QUANTIZATION[self.precision]
        )


def _keras_forward(model, precision):
    """One `tf.function` for every batch shape of `model`: a float32 `BertClassifier` in
    `OneDnnForms` (its function, faster), any other model (a mixed policy's copy, a model Keras
    quantized, a QuantizationAwareClassifier) its own graph."""
    import tensorflow as tf

    from keras_bert_impl.inference.litert_forms import computes_in_forms
    from keras_bert_impl.inference.onednn_forms import OneDnnForms
    from keras_bert_impl.models.integer_forms import classifier_forward

    if precision == "fp32" and computes_in_forms(model):
        forms = OneDnnForms()
        call = lambda inputs: classifier_forward(model, inputs, forms)  # noqa: E731
    else:
        call = lambda inputs: model(inputs, training=False)  # noqa: E731
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[spec, spec, spec])
    def forward(token_ids, segment_ids, padding_mask):
        return call({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask})

    return forward


def _task_of(model):
    """The task of a loaded model (a classifier's single-text one: "pair" is told)."""
    import keras_bert_impl as kb

    head = model.classifier if isinstance(model, kb.QuantizationAwareClassifier) else model
    if isinstance(head, kb.BertClassifier):
        return "multilabel" if head.multi_label else "classification"
    if isinstance(head, kb.BertTokenClassifier):
        return "tagging"
    if isinstance(head, kb.BertSpanLabeler):
        return "squad"
    if isinstance(head, (kb.BertEmbedder, kb.BertBackbone)):
        return "embedding"
    raise ValueError(
        f"ForwardResolver takes a model of this library (a head, an embedder or a backbone). "
        f"Received: model={type(model).__name__}"
    )
