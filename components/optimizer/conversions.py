"""Format conversions used by the variants: SavedModel export, TFLite and ONNX.

Models are whole Keras models with named inputs (numbers and text), preprocessing layers
included. The conversions that train (pruning, QAT) are in `fine_tuning`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from absl import logging

from components.optimizer import runtimes

# TFLite conversion modes.
FLOAT32 = "float32"
DYNAMIC_RANGE = "dynamic_range"
FLOAT16 = "float16"
INT8 = "int8"
TFLITE_MODES = (FLOAT32, DYNAMIC_RANGE, FLOAT16, INT8)

ONNX_OPSET = 17

RepresentativeDataset = Callable[[], Iterator[dict[str, np.ndarray]]]


def representative_dataset(inputs: runtimes.Inputs, rows: int) -> RepresentativeDataset:
  """A TFLite representative dataset: up to `rows` single-row dicts keyed by input name."""
  count = min(rows, runtimes.rows(inputs))
  # Text must be numpy bytes (dtype 'S'): given Python objects, the calibration silently
  # treats every value as out of vocabulary.
  sample = {
    k: (v[:count].astype(bytes) if v.dtype == object else v[:count]) for k, v in inputs.items()
  }

  def generate() -> Iterator[dict[str, np.ndarray]]:
    for i in range(count):
      yield {k: v[i : i + 1] for k, v in sample.items()}

  return generate


def _flex_needed(error: Exception) -> bool:
  text = str(error)
  return "ERROR_NEEDS_FLEX_OPS" in text or "neither a custom op nor a flex op" in text


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


class RestoredCall(tf.keras.layers.Layer):
  """Calls a Keras model's inference function restored by `tf.saved_model.load`.

  A run_fn that saves with `tf.saved_model.save` keeps the model's traced call but no Keras
  config. Wrapped in a functional model of this one layer, that call converts like any Keras
  model (TFLite, ONNX, TensorRT); what rebuilds Keras layers (pruning, QAT) cannot run on it.

  Args:
    restored: the object `tf.saved_model.load` returned (kept so exports save its variables).
    function: its concrete inference function; its tensor arguments are named specs.
  """

  def __init__(self, restored, function, **kwargs):
    super().__init__(**kwargs)
    self.restored = restored
    self._function = function
    self._signature = tf.nest.flatten(function.structured_input_signature)
    # Listed as the layer's weights, so the baseline's size and the float16 check see them.
    self.restored_variables = list(function.variables)

  def call(self, inputs):
    # Each tensor argument by its spec's name; the others (training=False, mask=None) as traced.
    flat = [inputs[x.name] if isinstance(x, tf.TensorSpec) else x for x in self._signature]
    args, kwargs = tf.nest.pack_sequence_as(self._function.structured_input_signature, flat)
    return tf.nest.flatten(self._function(*args, **kwargs))[0]

  def get_config(self) -> dict[str, Any]:
    # Enough to write the baseline's h5 (its size); a restored call cannot be rebuilt from it.
    return {"name": self.name}


def restored_call(model: tf.keras.Model) -> RestoredCall | None:
  """The RestoredCall layer of a model wrapping a restored function, else None."""
  return next((x for x in model.layers if isinstance(x, RestoredCall)), None)


def export_saved_model(model: tf.keras.Model, export_dir: str) -> str:
  """Saves a model for conversion: one `serving_default` signature over its named inputs.

  Keras' per-layer traces are not saved (save_traces=False): the converters need only the
  signature, and tracing every layer costs seconds per model. Every TFLite variant of a model
  converts from this one export instead of re-exporting the Keras model each time. A model
  wrapping a restored function is saved through the restored object (Keras' save of the
  wrapper takes 10-30 s, this about 2).
  """
  specs = {
    t.name.split(":")[0]: tf.TensorSpec(t.shape, t.dtype, name=t.name.split(":")[0])
    for t in model.inputs
  }
  serve = tf.function(lambda inputs: {"output_0": model(inputs, training=False)})
  restored = restored_call(model)
  if restored is not None:
    tf.saved_model.save(
      restored.restored, export_dir, signatures=serve.get_concrete_function(specs)
    )
    return export_dir
  model.save(
    export_dir,
    save_format="tf",
    include_optimizer=False,
    save_traces=False,
    signatures=serve.get_concrete_function(specs),
  )
  return export_dir


# Ops that TensorFlow 2.16's TFLite converter crashes on (a segmentation fault, which would end
# the whole run) when it quantizes a graph holding them to int8. DenseBincount is Keras'
# CategoryEncoding, as in TFX's taxi example model.
INT8_CRASHING_OPS = ("DenseBincount",)


class ConversionRefused(ValueError):
  """A conversion not attempted because it is known to crash or to be wrong for this model.

  Its message says why and which variant to serve instead; the Optimizer reports the variant as
  skipped with it, not as failed.
  """


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


# The layer a model's preprocessing ends in (the default model's concat of its parts).
PREPROCESSED_LAYER = "preprocessed"


def preprocessing_layers(model: tf.keras.Model) -> list[str]:
  """Names of the layers that feed the model's PREPROCESSED_LAYER, and that layer ([] without).

  int8 keeps them in float: the preprocessing maps raw columns on different scales to bins,
  one-hots, embeddings and date features, and its outputs meet in one concat, whose inputs
  must all be float for the converter.
  """
  names = {layer.name for layer in model.layers}
  if PREPROCESSED_LAYER not in names:
    return []
  found, todo = set(), [model.get_layer(PREPROCESSED_LAYER)]
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
    saved_model_dir: the model exported by `export_saved_model`.
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
      logging.info("TFLite %s with %s needs more ops (%s); adding Select TF ops.", mode, ops, error)
      continue
    return content, details
  raise last_error if last_error else RuntimeError("no TFLite conversion attempted")


def to_onnx(model: tf.keras.Model, onnx_path: str) -> dict[str, Any]:
  """Exports a Keras model to ONNX (opset ONNX_OPSET), inputs named as the model's.

  Returns:
    {"opset": ...}.
  """
  import tf2onnx

  signature = [tf.TensorSpec(t.shape, t.dtype, name=t.name.split(":")[0]) for t in model.inputs]
  tf2onnx.convert.from_keras(
    model, input_signature=signature, opset=ONNX_OPSET, output_path=onnx_path
  )
  return {"opset": ONNX_OPSET}
