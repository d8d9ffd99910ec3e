"""Model conversions used by the variants: pruning, QAT, TFLite and ONNX export.

Models are whole Keras models with named inputs (numbers and text), preprocessing layers
included. Fine-tuning after pruning or for quantization-aware training is distillation: the
converted model learns to reproduce the baseline's outputs on the training sample, which
needs neither labels nor the model's own loss, so it works for any task and any module.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from absl import logging

# TFLite conversion modes.
FLOAT32 = "float32"
DYNAMIC_RANGE = "dynamic_range"
FLOAT16 = "float16"
INT8 = "int8"
TFLITE_MODES = (FLOAT32, DYNAMIC_RANGE, FLOAT16, INT8)

ONNX_OPSET = 17
# Fraction of the fine-tuning steps after which pruning reaches its target sparsity.
PRUNING_END_FRACTION = 0.6

Inputs = dict[str, np.ndarray]
RepresentativeDataset = Callable[[], Iterator[dict[str, np.ndarray]]]


def _rows(inputs: Inputs) -> int:
  return len(next(iter(inputs.values())))


def representative_dataset(inputs: Inputs, rows: int) -> RepresentativeDataset:
  """A TFLite representative dataset: up to `rows` single-row dicts keyed by input name."""
  count = min(rows, _rows(inputs))
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
  if mode not in TFLITE_MODES:
    raise ValueError(f"Unknown TFLite mode {mode!r}; use one of {TFLITE_MODES}.")
  if mode == INT8 and representative is None:
    raise ValueError("int8 conversion needs a representative dataset.")
  crashing = sorted(_graph_ops(saved_model_dir) & set(INT8_CRASHING_OPS)) if mode == INT8 else []
  if crashing:
    raise ValueError(
      f"int8 quantization of a graph with {crashing} (Keras CategoryEncoding) crashes the "
      f"TFLite converter of TensorFlow {tf.__version__}, so it is not attempted; serve the "
      "float32, dynamic-range or float16 variant, or one-hot encode in the Transform."
    )
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
        nodes = []
        if float_layers:
          plain = _converter(saved_model_dir, FLOAT32, [o for o in ops if o != int8], None)
          nodes = [n for n in _tensor_names(plain.convert()) if _under(n, float_layers)]
        options = tf.lite.experimental.QuantizationDebugOptions(
          denylisted_ops=list(FLOAT_OPS_IN_INT8), denylisted_nodes=nodes or None
        )
        debugger = tf.lite.experimental.QuantizationDebugger(
          converter=_converter(saved_model_dir, mode, ops, representative),
          debug_dataset=representative,
          debug_options=options,
        )
        content = debugger.get_nondebug_quantized_model()
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


def distill(
  model: tf.keras.Model,
  inputs: Inputs,
  targets: np.ndarray,
  *,
  epochs: int,
  batch_size: int,
  learning_rate: float,
  seed: int = 0,
  callback: tf.keras.callbacks.Callback | None = None,
) -> None:
  """Fine-tunes `model` to reproduce `targets` (the baseline's outputs) on `inputs`.

  The loss is the mean squared difference, scaled by the targets' variance so that it means
  the same for probabilities and for regression values. A plain loop around one
  `tf.function(autograph=False)` step instead of `Model.fit`:
  - Autograph would transpile every tfmot wrapper on the first trace, which costs 15-20 s on a
    2-core CPU; the tfmot wrappers use explicit `tf.cond`, so they need no conversion.
  - `Model.fit` sums gradients across replicas through `tf.custom_gradient`, which registers a
    gradient function in TensorFlow's global registry per trace. That registry keeps each
    traced graph alive for the life of the process, and `clear_session` cannot free it.

  Args:
    model: the model to train in place.
    inputs: input name -> array.
    targets: the baseline's outputs, [rows, k].
    epochs: passes over the data, reshuffled each time.
    batch_size: rows per step.
    learning_rate: Adam learning rate.
    seed: seeds the shuffling.
    callback: receives `on_train_begin`, `on_train_batch_begin` and `on_epoch_end` the way
      `Model.fit` would call them (tfmot's `UpdatePruningStep` needs exactly these).
  """
  optimizer = tf.keras.optimizers.Adam(learning_rate)
  targets = np.asarray(targets, np.float32).reshape(len(targets), -1)
  loss_of = _distillation_loss(targets)
  specs = {t.name.split(":")[0]: tf.TensorSpec(t.shape, t.dtype) for t in model.inputs}
  signature = [specs, tf.TensorSpec([None, targets.shape[1]], tf.float32)]

  @tf.function(autograph=False, input_signature=signature)
  def train_step(x, y):
    with tf.GradientTape() as tape:
      out = tf.reshape(tf.cast(model(x, training=True), tf.float32), tf.shape(y))
      loss = loss_of(y, out)
      if model.losses:
        loss += tf.add_n(model.losses)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(
      zip(gradients, model.trainable_variables, strict=True), skip_gradients_aggregation=True
    )
    return loss

  if callback is not None:
    callback.set_model(model)
    callback.on_train_begin()
  rng = np.random.default_rng(seed)
  n = _rows(inputs)
  for epoch in range(epochs):
    order = rng.permutation(n)
    for batch, start in enumerate(range(0, n, batch_size)):
      rows = order[start : start + batch_size]
      if callback is not None:
        callback.on_train_batch_begin(batch)
      feed = {k: tf.constant(v[rows], dtype=specs[k].dtype) for k, v in inputs.items()}
      train_step(feed, tf.constant(targets[rows]))
    if callback is not None:
      callback.on_epoch_end(epoch)


# Layers with fewer kernel weights than this are left whole (a classifier's head: ten classes
# over 64 units keep 6 weights each at 90%, which costs accuracy and saves a few hundred bytes);
# the others are pruned harder so that the model as a whole still reaches the target.
MIN_PRUNED_WEIGHTS = 1024
# The most any one layer is pruned to make up for the layers left whole.
MAX_LAYER_SPARSITY = 0.97


def _pruning_plan(model: tf.keras.Model, target_sparsity: float) -> tuple[set[str], float]:
  """(names of the layers to prune, the sparsity each gets) for `target_sparsity` overall."""
  sizes = {
    layer.name: int(np.prod(layer.kernel.shape)) for layer in model.layers if _prunable(layer)
  }
  total = sum(sizes.values())
  pruned = set(sizes)
  # Spare the smallest layers first, as long as the rest can make up for them.
  for name in sorted(sizes, key=sizes.get):
    rest = sum(sizes[n] for n in pruned - {name})
    if sizes[name] >= MIN_PRUNED_WEIGHTS or not rest:
      break
    if target_sparsity * total / rest > MAX_LAYER_SPARSITY:
      break
    pruned.discard(name)
  wanted = target_sparsity * total / sum(sizes[n] for n in pruned)
  return pruned, max(target_sparsity, wanted)


def _distillation_loss(targets: np.ndarray):
  """The loss between the student's outputs and the baseline's `targets`.

  Probabilities (a softmax's rows, or one sigmoid column) are matched by cross-entropy to the
  soft targets: squared error on a probability has almost no gradient where the baseline is
  confident, which is where pruning moves the decision most. Anything else (regression values,
  logits) by squared error scaled by the targets' variance, so that it means the same at any
  scale.
  """
  in_unit = targets.size and float(targets.min()) >= 0.0 and float(targets.max()) <= 1.0
  if in_unit and targets.shape[1] > 1 and np.allclose(targets.sum(axis=1), 1.0, atol=1e-3):
    return lambda y, out: tf.reduce_mean(tf.keras.losses.categorical_crossentropy(y, out))
  if in_unit and targets.shape[1] == 1:
    return lambda y, out: tf.reduce_mean(tf.keras.losses.binary_crossentropy(y, out))
  scale = float(1.0 / max(np.var(targets), 1e-6))
  return lambda y, out: tf.reduce_mean(tf.square(out - y)) * scale


def _prunable(layer: tf.keras.layers.Layer) -> bool:
  return isinstance(layer, tf.keras.layers.Dense | tf.keras.layers.Conv1D | tf.keras.layers.Conv2D)


def prune(
  model: tf.keras.Model,
  inputs: Inputs,
  targets: np.ndarray,
  *,
  target_sparsity: float,
  epochs: int,
  batch_size: int,
  learning_rate: float,
  seed: int = 0,
) -> tf.keras.Model:
  """Magnitude-prunes the dense kernels to `target_sparsity` while distilling, then strips.

  Only Dense and convolution layers are wrapped (preprocessing layers are kept as they are).
  The PolynomialDecay schedule reaches the target at PRUNING_END_FRACTION of the steps,
  leaving the rest to recover at full sparsity.

  Args:
    model: the baseline Keras model; its layers are reused, so pass a freshly loaded copy.
    inputs: train sample, input name -> array.
    targets: the baseline's outputs on that sample.
    target_sparsity: fraction of kernel weights to zero, in [0, 1).
    epochs: fine-tuning epochs.
    batch_size: fine-tuning batch size.
    learning_rate: Adam learning rate for fine-tuning.
    seed: seeds the fine-tuning's shuffling.

  Returns:
    The pruned model with pruning wrappers stripped (plain Keras layers with zeroed weights).

  Raises:
    ValueError: when the model has no Dense or convolution layer to prune.
  """
  import tensorflow_model_optimization as tfmot

  if not any(_prunable(layer) for layer in model.layers):
    raise ValueError("the model has no Dense or convolution layer at its top level to prune")
  sparsity = tfmot.sparsity.keras
  total_steps = max(1, epochs * math.ceil(_rows(inputs) / batch_size))
  frequency = max(1, total_steps // 20)
  end_step = max(frequency, int(total_steps * PRUNING_END_FRACTION) // frequency * frequency)
  pruned_layers, layer_sparsity = _pruning_plan(model, target_sparsity)
  schedule = sparsity.PolynomialDecay(
    initial_sparsity=0.0,
    final_sparsity=layer_sparsity,
    begin_step=0,
    end_step=end_step,
    frequency=frequency,
  )

  def wrap(layer: tf.keras.layers.Layer) -> tf.keras.layers.Layer:
    if layer.name not in pruned_layers:
      return layer
    return sparsity.prune_low_magnitude(layer, pruning_schedule=schedule)

  # clone_function returns the original layer objects (wrapped or not), so weights carry over.
  pruned = tf.keras.models.clone_model(model, clone_function=wrap)
  distill(
    pruned,
    inputs,
    targets,
    epochs=epochs,
    batch_size=batch_size,
    learning_rate=learning_rate,
    seed=seed,
    callback=sparsity.UpdatePruningStep(),
  )
  logging.info("Pruned for %d steps (end_step=%d, frequency=%d).", total_steps, end_step, frequency)
  return sparsity.strip_pruning(pruned)


def kernel_sparsity(model: tf.keras.Model) -> dict:
  """The fraction of exactly-zero kernel weights, overall and per layer."""
  zeros = 0
  total = 0
  layers = {}
  for layer in model.layers:
    kernel = getattr(layer, "kernel", None)
    if kernel is None:
      continue
    values = np.asarray(kernel.numpy())
    layer_zeros = int(np.count_nonzero(values == 0))
    layers[layer.name] = layer_zeros / values.size
    zeros += layer_zeros
    total += values.size
  return {"overall": zeros / total if total else 0.0, "layers": layers}


def quantize_aware(
  model: tf.keras.Model,
  inputs: Inputs,
  targets: np.ndarray,
  *,
  epochs: int,
  batch_size: int,
  learning_rate: float,
  seed: int = 0,
) -> tuple[tf.keras.Model, str]:
  """Applies quantization-aware training with tfmot and distils briefly.

  The Dense and convolution layers train with fake quantization; the rest stay float during
  training and the int8 converter quantizes them from the representative dataset.

  Returns:
    (the fine-tuned quantization-aware model, which layers were annotated).
  """
  import tensorflow_model_optimization as tfmot

  quantization = tfmot.quantization.keras

  # Dense and convolution layers are annotated, except those fed by a Concatenate: whole-model
  # quantize_model rejects the preprocessing layers, and tfmot then fake-quantizes the
  # concatenation of numbers and one-hot columns with one scale that the int8 converter's
  # same-scale constraint rejects. Those layers are quantized after training, from the
  # representative dataset, like the rest of the model.
  def fed_by_concat(layer) -> bool:
    inbound = [n.inbound_layers for n in layer.inbound_nodes]
    flat = [x for group in inbound for x in (group if isinstance(group, list) else [group])]
    return any(isinstance(x, tf.keras.layers.Concatenate) for x in flat)

  # The preprocessing (an embedding's projection included) stays float, as in int8.
  keep_float = set(preprocessing_layers(model))
  annotated = tf.keras.models.clone_model(
    model,
    clone_function=lambda layer: (
      quantization.quantize_annotate_layer(layer)
      if _prunable(layer) and not fed_by_concat(layer) and layer.name not in keep_float
      else layer
    ),
  )
  with quantization.quantize_scope():
    qat_model = quantization.quantize_apply(annotated)
  scope = "dense_and_convolution_layers"
  distill(
    qat_model,
    inputs,
    targets,
    epochs=epochs,
    batch_size=batch_size,
    learning_rate=learning_rate,
    seed=seed,
  )
  return qat_model, scope


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
