"""Optimizer variants: each converts the baseline into one format and opens it in its runtime."""

from __future__ import annotations

import abc
import dataclasses
import os
import shutil
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from components import defaults, model_contract
from components.optimizer import conversions, fine_tuning, runtimes, tensorrt_lib

# Variant names (the list and its order live in components.defaults).
PRUNED = defaults.PRUNED
TFLITE_FLOAT32 = defaults.TFLITE_FLOAT32
TFLITE_DYNAMIC_RANGE = defaults.TFLITE_DYNAMIC_RANGE
TFLITE_FLOAT16 = defaults.TFLITE_FLOAT16
TFLITE_INT8 = defaults.TFLITE_INT8
PRUNED_INT8 = defaults.PRUNED_INT8
QAT = defaults.QAT
ONNX = defaults.ONNX
TENSORRT_FP16 = defaults.TENSORRT_FP16

TENSORRT_OFF = defaults.TENSORRT_OFF
TENSORRT_AUTO = defaults.TENSORRT_AUTO
TENSORRT_REQUIRED = defaults.TENSORRT_REQUIRED
TENSORRT_MODES = defaults.TENSORRT_MODES


@dataclasses.dataclass
class Conversion:
  """What a variant's `convert` produced.

  Attributes:
    model_files: files (relative to the variant folder) whose size is measured; the first one is
      the file a runtime loads.
    details: variant-specific facts for the report (sparsity reached, parity check, op sets).
  """

  model_files: list[str]
  details: dict[str, Any] = dataclasses.field(default_factory=dict)


class ConversionContext:
  """Inputs shared by all variants, with caches for work several variants reuse.

  The pruned model (used by `pruned` and `pruned_int8`) and the ONNX export (used by `onnx`
  and `tensorrt_fp16`) are each produced once per optimize() call, in `scratch_dir`.

  Attributes:
    baseline_path: the baseline Keras model saved as .h5 (variants load fresh copies).
    train_inputs: train sample, input name -> array (fine-tuning and calibration).
    train_targets: the baseline's outputs on the train sample (distillation targets).
    eval_inputs: eval rows, input name -> array.
    baseline_eval_outputs: the baseline's outputs on the eval rows.
    config: the OptimizerConfig.
    scratch_dir: a temporary folder for shared intermediate files.
    contract: the model's contract (the default model's), or None for a module's own model.
    restored_baseline: the baseline itself when it wraps a function restored from a SavedModel
      without Keras config (see conversions.RestoredCall): it cannot be reloaded from
      `baseline_path`, so the variants share it, and those that rebuild its layers skip.
  """

  def __init__(
    self,
    *,
    baseline_path: str,
    train_inputs: runtimes.Inputs,
    train_targets: np.ndarray,
    eval_inputs: runtimes.Inputs,
    baseline_eval_outputs: np.ndarray,
    config: Any,
    scratch_dir: str,
    restored_baseline: tf.keras.Model | None = None,
    contract: model_contract.ModelContract | None = None,
  ):
    self.restored_baseline = restored_baseline
    self.contract = contract
    self.baseline_path = baseline_path
    self.train_inputs = train_inputs
    self.train_targets = train_targets
    self.eval_inputs = eval_inputs
    self.baseline_eval_outputs = baseline_eval_outputs
    self.config = config
    self.scratch_dir = scratch_dir
    self._pruned = None
    self._onnx = None
    self._exports: dict[str, str] = {}
    self._models: dict[str, tuple[tf.keras.Model, dict]] = {}

  def load_baseline(self) -> tf.keras.Model:
    """A fresh copy of the baseline Keras model (variants may modify their copy).

    A restored baseline is shared: the variants that would modify it are skipped.
    """
    if self.restored_baseline is not None:
      return self.restored_baseline
    return tf.keras.models.load_model(self.baseline_path, compile=False)

  def keras_layers_missing(self, what: str, variants: str) -> str | None:
    """Why `what` cannot run on a restored baseline (it rebuilds Keras layers), else None."""
    if self.restored_baseline is None:
      return None
    return (
      f"{what} needs the Keras model; run_fn saved it with tf.saved_model.save, which keeps no "
      "Keras config: save with model.save(fn_args.serving_model_dir, save_format='tf', "
      f"signatures=...) to get {variants}."
    )

  def representative_dataset(self) -> conversions.RepresentativeDataset:
    """Calibration data for int8 conversion, drawn from the train sample."""
    return conversions.representative_dataset(self.train_inputs, self.config.representative_rows)

  def fine_tune_kwargs(self) -> dict[str, Any]:
    """Distillation settings; small samples get more epochs so every run has enough steps."""
    cfg = self.config
    rows = len(next(iter(self.train_inputs.values())))
    steps_per_epoch = max(1, -(-rows // cfg.fine_tune_batch_size))
    return {
      "epochs": max(cfg.fine_tune_epochs, -(-cfg.min_fine_tune_steps // steps_per_epoch)),
      "batch_size": cfg.fine_tune_batch_size,
      "learning_rate": cfg.fine_tune_learning_rate,
      "seed": cfg.seed,
    }

  def pruned_model(self) -> tuple[str, dict]:
    """Prunes and distils the baseline once.

    Returns:
      (path of the stripped pruned model as h5, kernel sparsity measured from its weights).
    """
    if self._pruned is None:
      pruned = fine_tuning.prune(
        self.load_baseline(),
        self.train_inputs,
        self.train_targets,
        target_sparsity=self.config.target_sparsity,
        **self.fine_tune_kwargs(),
      )
      path = os.path.join(self.scratch_dir, "pruned.h5")
      pruned.save(path, include_optimizer=False)
      self._pruned = (path, fine_tuning.kernel_sparsity(pruned))
    return self._pruned

  def load_pruned(self) -> tuple[tf.keras.Model, dict]:
    """The pruned model (loaded from its h5) and its measured sparsity."""
    path, sparsity = self.pruned_model()
    return tf.keras.models.load_model(path, compile=False), {"sparsity": sparsity}

  def cached_model(self, key: str, load) -> tuple[tf.keras.Model, dict]:
    """The model (and details) behind an export key, loaded once; variants do not modify it."""
    if key not in self._models:
      self._models[key] = load()
    return self._models[key]

  def export(self, key: str, model: tf.keras.Model) -> str:
    """A SavedModel export of `model` for the converters, made once per key."""
    if key not in self._exports:
      path = os.path.join(self.scratch_dir, f"export-{key}")
      self._exports[key] = conversions.export_saved_model(model, path)
    return self._exports[key]

  def onnx_model(self) -> tuple[str, dict]:
    """Exports the baseline to ONNX once; returns the .onnx path and export details."""
    if self._onnx is None:
      path = os.path.join(self.scratch_dir, "baseline.onnx")
      details = conversions.to_onnx(self.load_baseline(), path)
      self._onnx = (path, details)
    return self._onnx


class Variant(abc.ABC):
  """One optimization: `convert` writes files into a folder, `load` opens them in a runtime.

  The optimizer then measures the runtime and gates the result; variants never measure or gate
  themselves, so every variant is judged the same way.
  """

  name: ClassVar[str]
  runtime: ClassVar[str]
  # Whether convert() builds or trains Keras models (memory is released after such variants).
  builds_models: ClassVar[bool] = False

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
  """Magnitude pruning with distillation, shipped as a SavedModel that TensorFlow alone loads.

  Its `model_inputs` signature takes the Keras model's inputs by name (what signature.json
  lists and the Optimizer measures). A model with a contract (the default model) also gets the
  trainer's serving signatures: `serving_default` over serialized tf.Examples and `rows` over
  one named value per column, with contract.json beside them, so TF Serving serves the pruned
  model exactly as it serves the trained one.
  """

  name = PRUNED
  runtime = runtimes.SavedModelRuntime.name
  builds_models = True

  def skip_reason(self, context: ConversionContext) -> str | None:
    return context.keras_layers_missing("pruning", "pruned variants")

  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    model, details = context.cached_model("pruned", context.load_pruned)
    signatures = {
      model_contract.MODEL_INPUTS_SIGNATURE: model_contract.model_inputs_signature(model)
    }
    if context.contract is not None:
      columns = model_contract.contract_columns(context.contract)
      signatures["serving_default"] = model_contract.examples_signature(model, columns)
      signatures[model_contract.ROWS_SIGNATURE] = model_contract.rows_signature(model, columns)
    else:
      signatures["serving_default"] = signatures[model_contract.MODEL_INPUTS_SIGNATURE]
    model.save(
      out_dir, save_format="tf", include_optimizer=False, save_traces=False, signatures=signatures
    )
    if context.contract is not None:
      model_contract.write_contract(out_dir, context.contract)
    files = sorted(
      os.path.relpath(os.path.join(root, f), out_dir)
      for root, _, names in os.walk(out_dir)
      for f in names
    )
    files.remove("saved_model.pb")
    return Conversion(
      ["saved_model.pb", *files],
      {"target_sparsity": context.config.target_sparsity, **details, "format": "SavedModel"},
    )

  def load(self, out_dir: str, conversion: Conversion) -> runtimes.Runtime:
    del conversion
    return runtimes.SavedModelRuntime(out_dir, model_contract.MODEL_INPUTS_SIGNATURE)


class _TFLiteVariant(Variant):
  """Shared shape of the TFLite variants: get a Keras model, convert it, run the interpreter."""

  runtime = runtimes.TFLiteRuntime.name
  mode: ClassVar[str]

  # Key of the SavedModel export this variant converts; variants sharing a key share it. None:
  # the baseline's export when keras_model() is not overridden, else one of the variant's own.
  export_key: ClassVar[str | None] = None

  def _export_key(self) -> str:
    if self.export_key:
      return self.export_key
    own = type(self).keras_model is not _TFLiteVariant.keras_model
    return self.name if own else "baseline"

  def keras_model(self, context: ConversionContext) -> tuple[tf.keras.Model, dict]:
    """Returns the Keras model to convert and details to report about it."""
    return context.load_baseline(), {}

  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    key = self._export_key()
    model, details = context.cached_model(key, lambda: self.keras_model(context))
    representative = context.representative_dataset() if self.mode == conversions.INT8 else None
    if self.mode == conversions.FLOAT16:
      _check_float16_range(model)
    exported = context.export(key, model)
    content, conversion = conversions.to_tflite(
      exported,
      self.mode,
      representative,
      quantization_aware=self.name == QAT,
      float_layers=conversions.preprocessing_layers(model),
    )
    return Conversion([_write(out_dir, "model.tflite", content)], {**conversion, **details})

  def load(self, out_dir: str, conversion: Conversion) -> runtimes.Runtime:
    return runtimes.TFLiteRuntime(os.path.join(out_dir, conversion.model_files[0]))


FLOAT16_MAX = 65504.0


def _check_float16_range(model: tf.keras.Model) -> None:
  """Refuses a model whose constants overflow float16 (they would become infinity)."""
  for layer in model.layers:
    values = [np.asarray(w) for w in layer.get_weights()]
    config = layer.get_config()
    values += [np.asarray(config[k], dtype=np.float64) for k in ("mean", "std") if k in config]
    for value in values:
      if value.dtype.kind == "f" and value.size and np.nanmax(np.abs(value)) > FLOAT16_MAX:
        raise conversions.ConversionRefused(
          f"layer {layer.name!r} holds values up to {np.nanmax(np.abs(value)):.3g}, beyond "
          f"float16's {FLOAT16_MAX:g}; float16 would turn them into infinity. Serve the float32 "
          "or dynamic-range variant, or rescale that column before training."
        )


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
  export_key = "pruned"

  def skip_reason(self, context: ConversionContext) -> str | None:
    return context.keras_layers_missing("pruning", "pruned variants")

  def keras_model(self, context: ConversionContext) -> tuple[tf.keras.Model, dict]:
    return context.load_pruned()


@register
class QatVariant(_TFLiteVariant):
  """Quantization-aware fine-tuning (distilled) with tfmot, then full-integer conversion."""

  name = QAT
  mode = conversions.INT8
  export_key = "qat"
  builds_models = True

  def skip_reason(self, context: ConversionContext) -> str | None:
    return context.keras_layers_missing("quantization-aware training", "the qat variant")

  def keras_model(self, context: ConversionContext) -> tuple[tf.keras.Model, dict]:
    model, scope = fine_tuning.quantize_aware(
      context.load_baseline(),
      context.train_inputs,
      context.train_targets,
      **context.fine_tune_kwargs(),
    )
    return model, {"qat_scope": scope}


def onnx_parity(
  onnx_path: str, eval_inputs: runtimes.Inputs, reference: np.ndarray, tolerance: float
) -> dict:
  """Runs an ONNX model with onnxruntime on the CPU and compares it with TensorFlow's output.

  Returns:
    {"max_abs_diff", "rows", "tolerance", "passed"}.
  """
  with runtimes.OnnxRuntime(onnx_path) as runtime:
    outputs = runtimes.predict_batched(runtime, eval_inputs)
  diff = np.abs(outputs - reference)
  max_abs_diff = float(np.max(diff)) if diff.size else 0.0
  return {
    "max_abs_diff": max_abs_diff,
    "rows": len(outputs),
    "tolerance": tolerance,
    "passed": max_abs_diff <= tolerance,
  }


def _checked_onnx(context: ConversionContext) -> tuple[str, dict]:
  """Exports ONNX once and runs the parity check; raises if the export does not match TF."""
  path, details = context.onnx_model()
  reference = context.baseline_eval_outputs
  # Parity is relative to the output's scale (a regression value may be in the thousands).
  tolerance = context.config.onnx_parity_tolerance * max(1.0, float(np.max(np.abs(reference))))
  parity = onnx_parity(path, context.eval_inputs, reference, tolerance)
  if not parity["passed"]:
    raise RuntimeError(
      f"ONNX parity check failed: max abs diff {parity['max_abs_diff']:.3g} against TensorFlow "
      f"exceeds {parity['tolerance']:.3g}."
    )
  return path, {**details, "onnx_parity": parity}


def _date_columns(context: ConversionContext) -> list[str]:
  """The default model's date columns, which it parses from text with TensorFlow string ops."""
  if context.contract is None:
    return []
  return [c["column"] for i in context.contract.inputs for c in i["columns"] if c["kind"] == "date"]


@register
class OnnxVariant(Variant):
  """The baseline exported with tf2onnx, checked and run by onnxruntime on CPU."""

  name = ONNX
  runtime = runtimes.OnnxRuntime.name

  def skip_reason(self, context: ConversionContext) -> str | None:
    dates = _date_columns(context)
    if dates:
      return (
        f"the model parses the date column(s) {dates} from text, and ONNX has no ops for "
        "that; serve a tflite variant"
      )
    return None

  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    path, details = _checked_onnx(context)
    shutil.copyfile(path, os.path.join(out_dir, "model.onnx"))
    return Conversion(["model.onnx"], details)

  def load(self, out_dir: str, conversion: Conversion) -> runtimes.Runtime:
    return runtimes.OnnxRuntime(os.path.join(out_dir, conversion.model_files[0]))


@register
class TensorRTFp16Variant(Variant):
  """The checked ONNX export built into a TensorRT engine with FP16 enabled."""

  name = TENSORRT_FP16
  runtime = "tensorrt"

  def skip_reason(self, context: ConversionContext) -> str | None:
    text = [k for k, v in context.eval_inputs.items() if v.dtype == object]
    if text:
      serve = "a tflite variant" if _date_columns(context) else "the onnx or tflite variant"
      return (
        f"TensorRT takes numeric tensors only, and the model has text inputs {text}; serve {serve}"
      )
    return tensorrt_lib.unavailable_reason()

  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    path, details = _checked_onnx(context)
    build = tensorrt_lib.build_fp16_engine(path, os.path.join(out_dir, "model.plan"))
    return Conversion(["model.plan"], {"precision": "fp16", **details, **build})

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
