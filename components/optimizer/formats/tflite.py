"""TFLite formats (float32, dynamic range, float16, int8, pruned int8, QAT) and their runtime."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from components import model_contract
from components.optimizer import formats
from components.optimizer.formats import fine_tuning, keras_model, runtime_base, savedmodel_pruning
from components.optimizer.formats.variant_base import (
  Conversion,
  ConversionContext,
  ConversionRefused,
  Variant,
)
from core import defaults

_LOG = logging.getLogger(__name__)

# TFLite conversion modes.
FLOAT32 = "float32"
DYNAMIC_RANGE = "dynamic_range"
FLOAT16 = "float16"
INT8 = "int8"
TFLITE_MODES = (FLOAT32, DYNAMIC_RANGE, FLOAT16, INT8)

FLOAT16_MAX = 65504.0

# Elementwise ops of preprocessing (normalization, imputation, clipping). Full-integer
# quantization keeps them in float: columns on different scales cannot share one int8 scale
# (a raw income and a raw ratio would lose all precision in one input tensor), so the model
# quantizes after its own normalization, where every column spans the same range.
FLOAT_OPS_IN_INT8 = (
  "SUB",
  "MUL",
  "DIV",
  "MAXIMUM",
  "MINIMUM",
  "SELECT_V2",
  "NOT_EQUAL",
  "CONCATENATION",
)

# Ops that TensorFlow 2.16's TFLite converter crashes on (a segmentation fault, which would end
# the whole run) when it quantizes a graph holding them to int8. DenseBincount is Keras'
# CategoryEncoding, as in TFX's taxi example model.
INT8_CRASHING_OPS = ("DenseBincount",)

_PREPROCESSED_NAME = re.compile(
  f"{model_contract.PREPROCESSED_LAYER}({model_contract.MEMBER_SUFFIX_PATTERN})?"
)

RepresentativeDataset = Callable[[], Iterator[dict[str, np.ndarray]]]


def representative_dataset(inputs: runtime_base.Inputs, rows: int) -> RepresentativeDataset:
  """A TFLite representative dataset drawn from the head of a sample.

  Args:
    inputs: input name -> array.
    rows: the most rows to yield.

  Returns:
    A generator function yielding single-row dicts keyed by input name.
  """
  count = min(rows, runtime_base.rows(inputs))
  # Text must be numpy bytes (dtype 'S'): given Python objects, the calibration silently
  # treats every value as out of vocabulary.
  sample = {
    k: (v[:count].astype(bytes) if v.dtype == object else v[:count]) for k, v in inputs.items()
  }

  def generate() -> Iterator[dict[str, np.ndarray]]:
    for i in range(count):
      yield {k: v[i : i + 1] for k, v in sample.items()}

  return generate


def preprocessing_layers(model: tf.keras.Model) -> list[str]:
  """Names of the layers that feed the model's PREPROCESSED_LAYER (each ensemble member's), and
  those layers ([] without).

  int8 keeps them in float: the preprocessing maps raw columns on different scales to bins,
  one-hots, embeddings and date features, and its outputs meet in one concat, whose inputs
  must all be float for the converter.

  Args:
    model: the Keras model to convert.

  Returns:
    The layer names, sorted.
  """
  found = set()
  todo = [layer for layer in model.layers if _PREPROCESSED_NAME.fullmatch(layer.name)]
  while todo:
    layer = todo.pop()
    if layer.name in found or isinstance(layer, tf.keras.layers.InputLayer):
      continue
    found.add(layer.name)
    for node in layer.inbound_nodes:
      todo.extend(
        node.inbound_layers if isinstance(node.inbound_layers, list) else [node.inbound_layers]
      )
  return sorted(found)


def _flex_needed(error: Exception) -> bool:
  text = str(error)
  return "ERROR_NEEDS_FLEX_OPS" in text or "neither a custom op nor a flex op" in text


def _graph_ops(saved_model_dir: str) -> set[str]:
  """Every op type in a SavedModel, its functions' bodies included."""
  from tensorflow.core.protobuf import saved_model_pb2

  saved = saved_model_pb2.SavedModel()
  with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
    saved.ParseFromString(f.read())
  ops = set()
  for meta in saved.meta_graphs:
    ops.update(node.op for node in meta.graph_def.node)
    for function in meta.graph_def.library.function:
      ops.update(node.op for node in function.node_def)
  return ops


def _converter(saved_model_dir, mode, ops, representative):
  converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
  if mode != FLOAT32:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  if mode == FLOAT16:
    converter.target_spec.supported_types = [tf.float16]
  if mode == INT8:
    converter.representative_dataset = representative
  converter.target_spec.supported_ops = list(ops)
  return converter


def _tensor_names(content: bytes) -> list[str]:
  return [t["name"] for t in tf.lite.Interpreter(model_content=content).get_tensor_details()]


def _under(name: str, layers: Sequence[str]) -> bool:
  # A fused op's tensor is named after each op it fused: "model/a/MatMul;model/a/BiasAdd".
  return any(f"/{layer}/" in f"/{part}" for part in name.split(";") for layer in layers)


def _check_tflite_request(
  saved_model_dir: str, mode: str, representative: RepresentativeDataset | None
) -> None:
  """Refuses an unknown mode, int8 without calibration data, and int8 that would crash."""
  if mode not in TFLITE_MODES:
    raise ValueError(f"Unknown TFLite mode {mode!r}; use one of {TFLITE_MODES}.")
  if mode == INT8 and representative is None:
    raise ValueError("int8 conversion needs a representative dataset.")
  crashing = sorted(_graph_ops(saved_model_dir) & set(INT8_CRASHING_OPS)) if mode == INT8 else []
  if crashing:
    raise ConversionRefused(
      f"int8 quantization of a graph with {crashing} (Keras CategoryEncoding) crashes the "
      f"TFLite converter of TensorFlow {tf.__version__}, so it is not attempted; serve the "
      "float32, dynamic-range or float16 variant, or one-hot encode in the Transform."
    )


def _selectively_quantized(
  saved_model_dir: str,
  ops: Sequence[tf.lite.OpsSet],
  representative: RepresentativeDataset,
  float_layers: Sequence[str],
) -> bytes:
  """int8 with FLOAT_OPS_IN_INT8 and the ops of `float_layers` left in float.

  TFLite's QuantizationDebugger denylists ops by type and nodes by tensor name; the names of
  the float layers' tensors are read from a float32 conversion of the same graph.
  """
  nodes = []
  if float_layers:
    float_ops = [o for o in ops if o != tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    plain = _converter(saved_model_dir, FLOAT32, float_ops, None)
    nodes = [n for n in _tensor_names(plain.convert()) if _under(n, float_layers)]
  options = tf.lite.experimental.QuantizationDebugOptions(
    denylisted_ops=list(FLOAT_OPS_IN_INT8), denylisted_nodes=nodes or None
  )
  debugger = tf.lite.experimental.QuantizationDebugger(
    converter=_converter(saved_model_dir, INT8, ops, representative),
    debug_dataset=representative,
    debug_options=options,
  )
  return debugger.get_nondebug_quantized_model()


def to_tflite(
  saved_model_dir: str,
  mode: str,
  representative: RepresentativeDataset | None = None,
  quantization_aware: bool = False,
  float_layers: Sequence[str] = (),
) -> tuple[bytes, dict[str, Any]]:
  """Converts a Keras model to a TFLite flatbuffer, with builtin ops where possible.

  SELECT_TF_OPS (TensorFlow ops run by the Flex delegate) are added only when the converter
  reports an op with no builtin. INT8 quantizes weights and activations to int8 except the
  elementwise preprocessing ops (FLOAT_OPS_IN_INT8), through TFLite's selective quantization
  (QuantizationDebugger with denylisted ops); inputs and outputs stay float.

  Args:
    saved_model_dir: the model exported by `keras_model.export_saved_model`.
    mode: one of TFLITE_MODES.
    representative: calibration data; required for INT8.
    quantization_aware: the model was trained with fake quantization (tfmot QAT); its own
      quantization ranges are used, and selective quantization applies only to
      `float_layers` (the converter crashes on a QAT model whose preprocessing it quantizes).
    float_layers: layers whose ops stay float under INT8 (`preprocessing_layers`), besides
      the FLOAT_OPS_IN_INT8 ops.

  Returns:
    (the .tflite file contents, details: op sets used, whether Select TF ops were needed and,
    for INT8, which ops stayed float).

  Raises:
    ValueError: for an unknown mode, INT8 without representative data, or INT8 of a graph with
      an op in INT8_CRASHING_OPS.
  """
  _check_tflite_request(saved_model_dir, mode, representative)
  builtins, int8, select = (
    tf.lite.OpsSet.TFLITE_BUILTINS,
    tf.lite.OpsSet.TFLITE_BUILTINS_INT8,
    tf.lite.OpsSet.SELECT_TF_OPS,
  )
  base = (int8, builtins) if mode == INT8 else (builtins,)
  last_error: Exception | None = None
  for ops in (base, (*base, select)):
    details = {
      "tflite_mode": mode,
      "op_sets": [o.name for o in ops],
      "select_tf_ops": select in ops,
    }
    try:
      if mode == INT8 and (float_layers or not quantization_aware):
        content = _selectively_quantized(saved_model_dir, ops, representative, float_layers)
        details["float_ops"] = list(FLOAT_OPS_IN_INT8)
        if float_layers:
          details["float_layers"] = list(float_layers)
      else:
        content = _converter(saved_model_dir, mode, ops, representative).convert()
    except Exception as error:  # The converter raises its own ConverterError types.
      last_error = error
      if not _flex_needed(error):
        raise
      _LOG.info("TFLite %s with %s needs more ops (%s); adding Select TF ops.", mode, ops, error)
      continue
    return content, details
  raise last_error if last_error else RuntimeError("no TFLite conversion attempted")


def _quantize(x: np.ndarray, detail: dict) -> np.ndarray:
  """Maps float input onto a quantized input tensor using its scale and zero point."""
  dtype = detail["dtype"]
  if dtype in (np.float32, np.bytes_, np.object_) or x.dtype == object:
    return runtime_base.as_feed(x, dtype)
  scale, zero_point = detail["quantization"]
  if not scale:
    return x.astype(dtype)
  info = np.iinfo(dtype)
  return np.clip(np.round(x / scale + zero_point), info.min, info.max).astype(dtype)


def _dequantize(y: np.ndarray, detail: dict) -> np.ndarray:
  """Maps a quantized output tensor back to float using its scale and zero point."""
  if detail["dtype"] == np.float32:
    return y.astype(np.float32)
  scale, zero_point = detail["quantization"]
  return ((y.astype(np.float32) - zero_point) * scale).astype(np.float32)


def _detail(name: str, detail: dict) -> dict[str, Any]:
  scale, zero_point = detail.get("quantization", (0.0, 0))
  entry = {
    "name": name,
    "dtype": np.dtype(detail["dtype"]).name if detail["dtype"] is not np.bytes_ else "string",
    "shape": [int(d) for d in detail.get("shape_signature", detail.get("shape", []))],
  }
  if scale:
    entry["quantization"] = {"scale": float(scale), "zero_point": int(zero_point)}
  return entry


class TFLiteRuntime(runtime_base.Runtime):
  """A .tflite model run by `tf.lite.Interpreter` through its signature runner.

  Quantized (int8) inputs are quantized from float with their scale and zero point, and
  quantized outputs dequantized, so callers always feed and read floats.
  """

  name = "tflite"

  def __init__(self, tflite_path: str, num_threads: int | None = None):
    self._interpreter = tf.lite.Interpreter(model_path=tflite_path, num_threads=num_threads)
    self._runner = self._interpreter.get_signature_runner()
    self._inputs = self._runner.get_input_details()
    self._outputs = self._runner.get_output_details()
    self._output_name = sorted(self._outputs)[0]

  @property
  def input_details(self) -> dict[str, dict]:
    """Signature input name -> detail (dtype, quantization)."""
    return self._inputs

  @property
  def output_detail(self) -> dict:
    """The first output's detail."""
    return self._outputs[self._output_name]

  def predict(self, batch: runtime_base.Inputs) -> np.ndarray:
    feed = {k: _quantize(np.asarray(batch[k]), d) for k, d in self._inputs.items()}
    out = self._runner(**feed)[self._output_name]
    return _dequantize(out, self.output_detail)

  def signature(self) -> dict[str, Any]:
    # Order of the interpreter's input tensors, which is what index-based clients use.
    by_index = sorted(self._inputs.items(), key=lambda kv: kv[1]["index"])
    return {
      "signature_key": "serving_default",
      "inputs": [_detail(k, d) for k, d in by_index],
      "outputs": [_detail(k, d) for k, d in sorted(self._outputs.items())],
    }

  def close(self) -> None:
    self._runner = None
    self._interpreter = None


def check_float16_range(model: tf.keras.Model) -> None:
  """Refuses a model whose constants overflow float16 (they would become infinity).

  Args:
    model: the Keras model to convert.

  Raises:
    ConversionRefused: naming the layer and what to serve instead.
  """
  for layer in model.layers:
    values = [np.asarray(w) for w in layer.get_weights()]
    config = layer.get_config()
    values += [np.asarray(config[k], dtype=np.float64) for k in ("mean", "std") if k in config]
    for value in values:
      if value.dtype.kind == "f" and value.size and np.nanmax(np.abs(value)) > FLOAT16_MAX:
        raise ConversionRefused(
          f"layer {layer.name!r} holds values up to {np.nanmax(np.abs(value)):.3g}, beyond "
          f"float16's {FLOAT16_MAX:g}; float16 would turn them into infinity. Serve the float32 "
          "or dynamic-range variant, or rescale that column before training."
        )


class TFLiteVariant(Variant):
  """Shared shape of the TFLite variants: get a Keras model, convert it, run the interpreter."""

  runtime = TFLiteRuntime.name
  mode: ClassVar[str]

  # Key of the SavedModel export this variant converts; variants sharing a key share it. None:
  # the baseline's export when keras_model() is not overridden, else one of the variant's own.
  export_key: ClassVar[str | None] = None

  def _export_key(self) -> str:
    if self.export_key:
      return self.export_key
    own = type(self).keras_model is not TFLiteVariant.keras_model
    return self.name if own else "baseline"

  def keras_model(self, context: ConversionContext) -> tuple[tf.keras.Model, dict]:
    """Returns the Keras model to convert and details to report about it."""
    return context.load_baseline(), {}

  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    key = self._export_key()
    model, details = context.shared(f"tflite/model/{key}", lambda: self.keras_model(context))
    representative = None
    if self.mode == INT8:
      representative = representative_dataset(
        context.train_inputs, context.config.representative_rows
      )
    if self.mode == FLOAT16:
      check_float16_range(model)
    exported = context.shared(
      f"tflite/export/{key}",
      lambda: keras_model.export_saved_model(
        model, os.path.join(context.scratch_dir, f"export-{key}")
      ),
    )
    content, conversion = to_tflite(
      exported,
      self.mode,
      representative,
      quantization_aware=self.name == defaults.QAT,
      float_layers=preprocessing_layers(model),
    )
    with open(os.path.join(out_dir, "model.tflite"), "wb") as f:
      f.write(content)
    return Conversion(["model.tflite"], {**conversion, **details})

  def load(self, out_dir: str, conversion: Conversion) -> runtime_base.Runtime:
    return TFLiteRuntime(os.path.join(out_dir, conversion.model_files[0]))


@formats.register
class TFLiteFloat32Variant(TFLiteVariant):
  """Plain TFLite conversion, float32 weights and activations."""

  name = defaults.TFLITE_FLOAT32
  mode = FLOAT32


@formats.register
class TFLiteDynamicRangeVariant(TFLiteVariant):
  """Post-training dynamic-range quantization: int8 weights, float activations."""

  name = defaults.TFLITE_DYNAMIC_RANGE
  mode = DYNAMIC_RANGE


@formats.register
class TFLiteFloat16Variant(TFLiteVariant):
  """Post-training float16 quantization of the weights."""

  name = defaults.TFLITE_FLOAT16
  mode = FLOAT16


@formats.register
class TFLiteInt8Variant(TFLiteVariant):
  """Post-training full-integer quantization calibrated on the train sample."""

  name = defaults.TFLITE_INT8
  mode = INT8


@formats.register
class PrunedInt8Variant(TFLiteVariant):
  """The pruned model, full-integer quantized (sparsity survives as zero int8 weights)."""

  name = defaults.PRUNED_INT8
  mode = INT8
  export_key = "pruned"

  def skip_reason(self, context: ConversionContext) -> str | None:
    return savedmodel_pruning.pruning_skip_reason(context)

  def keras_model(self, context: ConversionContext) -> tuple[tf.keras.Model, dict]:
    return savedmodel_pruning.pruned_model(context)


@formats.register
class QatVariant(TFLiteVariant):
  """Quantization-aware fine-tuning (distilled) with tfmot, then full-integer conversion."""

  name = defaults.QAT
  mode = INT8
  export_key = "qat"
  builds_models = True

  def skip_reason(self, context: ConversionContext) -> str | None:
    return context.keras_layers_missing("quantization-aware training", "the qat variant")

  def keras_model(self, context: ConversionContext) -> tuple[tf.keras.Model, dict]:
    baseline = context.load_baseline()
    model, scope = fine_tuning.quantize_aware(
      baseline,
      context.train_inputs,
      context.train_targets,
      keep_float=preprocessing_layers(baseline),
      **context.fine_tune_kwargs(),
    )
    return model, {"qat_scope": scope}
