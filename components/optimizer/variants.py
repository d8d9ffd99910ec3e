"""Optimizer variants: each converts the baseline into one format and opens it in its runtime."""

import abc
import dataclasses
import os
import shutil
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from components.optimizer import conversions, runtimes, tensorrt_lib

# Variant names.
PRUNED = "pruned"
TFLITE_FLOAT32 = "tflite_float32"
TFLITE_DYNAMIC_RANGE = "tflite_dynamic_range"
TFLITE_FLOAT16 = "tflite_float16"
TFLITE_INT8 = "tflite_int8"
PRUNED_INT8 = "pruned_int8"
QAT = "qat"
ONNX = "onnx"
TENSORRT_FP16 = "tensorrt_fp16"

# tensorrt modes.
TENSORRT_OFF = "off"
TENSORRT_AUTO = "auto"
TENSORRT_REQUIRED = "required"
TENSORRT_MODES = (TENSORRT_OFF, TENSORRT_AUTO, TENSORRT_REQUIRED)


@dataclasses.dataclass
class Conversion:
  """What a variant's `convert` produced.

  Attributes:
    model_files: files (relative to the variant folder) whose size is measured; the first one is
      the file a runtime loads.
    details: variant-specific facts for the report (sparsity reached, parity check, ...).
  """

  model_files: list[str]
  details: dict[str, Any] = dataclasses.field(default_factory=dict)


class ConversionContext:
  """Inputs shared by all variants, with caches for work several variants reuse.

  The pruned model (used by `pruned` and `pruned_int8`) and the ONNX export (used by `onnx`
  and `tensorrt_fp16`) are each produced once per optimize() call, in `scratch_dir`.
  """

  def __init__(
    self,
    *,
    baseline_h5: str,
    train_x: np.ndarray,
    train_y: np.ndarray,
    eval_x: np.ndarray,
    eval_y: np.ndarray,
    baseline_eval_probs: np.ndarray,
    config: Any,
    scratch_dir: str,
  ):
    self.baseline_h5 = baseline_h5
    self.train_x = train_x
    self.train_y = train_y
    self.eval_x = eval_x
    self.eval_y = eval_y
    self.baseline_eval_probs = baseline_eval_probs
    self.config = config
    self.scratch_dir = scratch_dir
    self._pruned = None
    self._onnx_path = None

  def load_baseline(self) -> tf.keras.Model:
    """Returns a fresh copy of the baseline Keras model (variants may modify their copy)."""
    return tf.keras.models.load_model(self.baseline_h5, compile=False)

  def representative_dataset(self) -> conversions.RepresentativeDataset:
    """Calibration data for int8 conversion, drawn from the train sample."""
    return conversions.representative_dataset(self.train_x, self.config.representative_rows)

  def pruned_model(self) -> tuple[str, dict]:
    """Prunes and fine-tunes the baseline once.

    Returns:
      (path of the stripped pruned model as h5, kernel sparsity measured from its weights).
    """
    if self._pruned is None:
      cfg = self.config
      pruned = conversions.prune(
        self.load_baseline(),
        self.train_x,
        self.train_y,
        target_sparsity=cfg.target_sparsity,
        epochs=cfg.fine_tune_epochs,
        batch_size=cfg.fine_tune_batch_size,
        learning_rate=cfg.fine_tune_learning_rate,
        seed=cfg.seed,
      )
      path = os.path.join(self.scratch_dir, "pruned.h5")
      pruned.save(path, include_optimizer=False)
      self._pruned = (path, conversions.kernel_sparsity(pruned))
    return self._pruned

  def onnx_model(self) -> str:
    """Exports the baseline to ONNX once and returns the .onnx path."""
    if self._onnx_path is None:
      path = os.path.join(self.scratch_dir, "baseline.onnx")
      conversions.to_onnx(self.load_baseline(), path)
      self._onnx_path = path
    return self._onnx_path


class Variant(abc.ABC):
  """One optimization: `convert` writes files into a folder, `load` opens them in a runtime.

  The optimizer then measures the runtime and gates the result; variants never measure or gate
  themselves, so every variant is judged the same way.
  """

  name: ClassVar[str]
  runtime: ClassVar[str]

  def skip_reason(self, context: ConversionContext) -> str | None:
    """Returns why this variant cannot run on this host, or None to run it."""
    del context
    return None

  @abc.abstractmethod
  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    """Writes the converted model into `out_dir` (which exists and is empty)."""

  @abc.abstractmethod
  def load(self, out_dir: str, conversion: Conversion) -> runtimes.Runtime:
    """Opens the converted model in this variant's runtime."""


VARIANTS: dict[str, type[Variant]] = {}


def register(cls: type[Variant]) -> type[Variant]:
  """Class decorator adding a variant to the registry under its `name`."""
  VARIANTS[cls.name] = cls
  return cls


def _write(out_dir: str, filename: str, content: bytes) -> str:
  with open(os.path.join(out_dir, filename), "wb") as f:
    f.write(content)
  return filename


@register
class PrunedVariant(Variant):
  """Magnitude pruning with fine-tuning, saved as a Keras h5 and run by TensorFlow."""

  name = PRUNED
  runtime = runtimes.KerasRuntime.name

  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    path, sparsity = context.pruned_model()
    shutil.copyfile(path, os.path.join(out_dir, "model.h5"))
    return Conversion(
      ["model.h5"],
      {"target_sparsity": context.config.target_sparsity, "sparsity": sparsity},
    )

  def load(self, out_dir: str, conversion: Conversion) -> runtimes.Runtime:
    return runtimes.KerasRuntime(os.path.join(out_dir, conversion.model_files[0]))


class _TFLiteVariant(Variant):
  """Shared shape of the TFLite variants: get a Keras model, convert it, run the interpreter."""

  runtime = runtimes.TFLiteRuntime.name
  mode: ClassVar[str]

  def keras_model(self, context: ConversionContext) -> tuple[tf.keras.Model, dict]:
    """Returns the Keras model to convert and details to report about it."""
    return context.load_baseline(), {}

  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    model, details = self.keras_model(context)
    representative = context.representative_dataset() if self.mode == conversions.INT8 else None
    fallback = context.config.int8_fallback and self.mode == conversions.INT8
    content = conversions.to_tflite(model, self.mode, representative, int8_fallback=fallback)
    details = {"tflite_mode": self.mode, **details}
    if self.mode == conversions.INT8:
      details["int8_fallback"] = fallback
    return Conversion([_write(out_dir, "model.tflite", content)], details)

  def load(self, out_dir: str, conversion: Conversion) -> runtimes.Runtime:
    runtime = runtimes.TFLiteRuntime(os.path.join(out_dir, conversion.model_files[0]))
    conversion.details["input_dtype"] = np.dtype(runtime.input_detail["dtype"]).name
    conversion.details["output_dtype"] = np.dtype(runtime.output_detail["dtype"]).name
    return runtime


@register
class TFLiteFloat32Variant(_TFLiteVariant):
  """Plain TFLite conversion, float32 weights and activations."""

  name = TFLITE_FLOAT32
  mode = conversions.FLOAT32


@register
class TFLiteDynamicRangeVariant(_TFLiteVariant):
  """Post-training dynamic-range quantization: int8 weights, float activations."""

  name = TFLITE_DYNAMIC_RANGE
  mode = conversions.DYNAMIC_RANGE


@register
class TFLiteFloat16Variant(_TFLiteVariant):
  """Post-training float16 quantization of the weights."""

  name = TFLITE_FLOAT16
  mode = conversions.FLOAT16


@register
class TFLiteInt8Variant(_TFLiteVariant):
  """Post-training full-integer quantization calibrated on the train sample."""

  name = TFLITE_INT8
  mode = conversions.INT8


@register
class PrunedInt8Variant(_TFLiteVariant):
  """The pruned model, full-integer quantized (sparsity survives as zero int8 weights)."""

  name = PRUNED_INT8
  mode = conversions.INT8

  def keras_model(self, context: ConversionContext) -> tuple[tf.keras.Model, dict]:
    path, sparsity = context.pruned_model()
    model = tf.keras.models.load_model(path, compile=False)
    return model, {"sparsity": sparsity}


@register
class QatVariant(_TFLiteVariant):
  """Quantization-aware fine-tuning with tfmot, then full-integer conversion."""

  name = QAT
  mode = conversions.INT8

  def keras_model(self, context: ConversionContext) -> tuple[tf.keras.Model, dict]:
    cfg = context.config
    model, scope = conversions.quantize_aware(
      context.load_baseline(),
      context.train_x,
      context.train_y,
      epochs=cfg.fine_tune_epochs,
      batch_size=cfg.fine_tune_batch_size,
      learning_rate=cfg.fine_tune_learning_rate,
      seed=cfg.seed,
    )
    return model, {"qat_scope": scope}


def onnx_parity(
  onnx_path: str, eval_x: np.ndarray, reference_probs: np.ndarray, tolerance: float
) -> dict:
  """Runs an ONNX model with onnxruntime on the CPU and compares it with TensorFlow's output.

  Args:
    onnx_path: the exported model.
    eval_x: float32 eval features.
    reference_probs: the baseline's TensorFlow probabilities on `eval_x`.
    tolerance: the largest allowed absolute difference of any probability.

  Returns:
    {"max_abs_diff", "top1_agreement", "rows", "tolerance", "passed"}.
  """
  with runtimes.OnnxRuntime(onnx_path) as runtime:
    probs = runtimes.predict_batched(runtime, eval_x)
  max_abs_diff = float(np.max(np.abs(probs - reference_probs))) if len(probs) else 0.0
  agreement = float(np.mean(probs.argmax(1) == reference_probs.argmax(1))) if len(probs) else 1.0
  return {
    "max_abs_diff": max_abs_diff,
    "top1_agreement": agreement,
    "rows": len(eval_x),
    "tolerance": tolerance,
    "passed": max_abs_diff <= tolerance,
  }


def _checked_onnx(context: ConversionContext) -> tuple[str, dict]:
  """Exports ONNX once and runs the parity check; raises if the export does not match TF."""
  path = context.onnx_model()
  parity = onnx_parity(
    path, context.eval_x, context.baseline_eval_probs, context.config.onnx_parity_tolerance
  )
  if not parity["passed"]:
    raise RuntimeError(
      f"ONNX parity check failed: max abs diff {parity['max_abs_diff']:.3g} against TensorFlow "
      f"exceeds {parity['tolerance']:.3g}."
    )
  return path, parity


@register
class OnnxVariant(Variant):
  """The baseline exported with tf2onnx (opset 17), checked and run by onnxruntime on CPU."""

  name = ONNX
  runtime = runtimes.OnnxRuntime.name

  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    path, parity = _checked_onnx(context)
    shutil.copyfile(path, os.path.join(out_dir, "model.onnx"))
    return Conversion(["model.onnx"], {"opset": conversions.ONNX_OPSET, "onnx_parity": parity})

  def load(self, out_dir: str, conversion: Conversion) -> runtimes.Runtime:
    return runtimes.OnnxRuntime(os.path.join(out_dir, conversion.model_files[0]))


@register
class TensorRTFp16Variant(Variant):
  """The checked ONNX export built into a TensorRT engine with FP16 enabled."""

  name = TENSORRT_FP16
  runtime = "tensorrt"

  def skip_reason(self, context: ConversionContext) -> str | None:
    return tensorrt_lib.unavailable_reason()

  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    path, parity = _checked_onnx(context)
    build = tensorrt_lib.build_fp16_engine(path, os.path.join(out_dir, "model.plan"))
    return Conversion(["model.plan"], {"precision": "fp16", "onnx_parity": parity, **build})

  def load(self, out_dir: str, conversion: Conversion) -> runtimes.Runtime:
    return tensorrt_lib.TensorRTRuntime(os.path.join(out_dir, conversion.model_files[0]))


def create(name: str) -> Variant:
  """Instantiates a registered variant by name.

  Raises:
    ValueError: for a name that is not registered.
  """
  if name not in VARIANTS:
    raise ValueError(f"Unknown optimizer variant {name!r}; choose from {sorted(VARIANTS)}.")
  return VARIANTS[name]()
