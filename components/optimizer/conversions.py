"""Model conversions used by the variants: pruning, QAT, TFLite and ONNX export."""

import math
from collections.abc import Callable, Iterator

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
ONNX_INPUT_NAME = "input"
# Fraction of the fine-tuning steps after which pruning reaches its target sparsity.
PRUNING_END_FRACTION = 0.7

RepresentativeDataset = Callable[[], Iterator[list[np.ndarray]]]


def representative_dataset(x: np.ndarray, rows: int) -> RepresentativeDataset:
  """Returns a TFLite representative dataset yielding up to `rows` single-row batches of `x`.

  Args:
    x: float32 train features, shape [rows, num_features].
    rows: how many rows to yield at most.

  Returns:
    A zero-argument generator function, as `TFLiteConverter.representative_dataset` expects.
  """
  sample = np.asarray(x[:rows], dtype=np.float32)

  def generate() -> Iterator[list[np.ndarray]]:
    for row in sample:
      yield [row[np.newaxis, :]]

  return generate


def to_tflite(
  model: tf.keras.Model,
  mode: str,
  representative: RepresentativeDataset | None = None,
  int8_fallback: bool = False,
) -> bytes:
  """Converts a Keras model to a TFLite flatbuffer.

  Args:
    model: the Keras model (plain, stripped-pruned or quantization-aware).
    mode: one of TFLITE_MODES.
    representative: calibration data; required for INT8.
    int8_fallback: for INT8, also allow float builtin ops and keep float input/output instead of
      failing on ops that have no int8 kernel.

  Returns:
    The .tflite file contents.

  Raises:
    ValueError: for an unknown mode or INT8 without representative data.
  """
  converter = tf.lite.TFLiteConverter.from_keras_model(model)
  if mode == FLOAT32:
    pass
  elif mode == DYNAMIC_RANGE:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  elif mode == FLOAT16:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]
  elif mode == INT8:
    if representative is None:
      raise ValueError("int8 conversion needs a representative dataset.")
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    if int8_fallback:
      converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS_INT8,
        tf.lite.OpsSet.TFLITE_BUILTINS,
      ]
    else:
      converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
      converter.inference_input_type = tf.int8
      converter.inference_output_type = tf.int8
  else:
    raise ValueError(f"Unknown TFLite mode {mode!r}; use one of {TFLITE_MODES}.")
  return converter.convert()


def fine_tune(
  model: tf.keras.Model,
  train_x: np.ndarray,
  train_y: np.ndarray,
  *,
  epochs: int,
  batch_size: int,
  learning_rate: float,
  seed: int = 0,
  callback: tf.keras.callbacks.Callback | None = None,
) -> None:
  """Fine-tunes a classifier with Adam on sparse categorical cross-entropy.

  A plain loop around one `tf.function(autograph=False)` step instead of `Model.fit`:
  - Autograph would transpile every tfmot wrapper on the first trace, which costs 15-20 s on a
    2-core CPU; the tfmot wrappers use explicit `tf.cond`, so they need no conversion.
  - `Model.fit` sums gradients across replicas through `tf.custom_gradient`, which registers a
    gradient function in TensorFlow's global registry per trace. That registry keeps each traced
    graph alive for the life of the process (about 25 MB per pruning run), and
    `clear_session` cannot free it; with one replica the sum is the identity, so it is skipped.

  Args:
    model: the model to train in place.
    train_x: float32 features.
    train_y: int labels.
    epochs: passes over the data, reshuffled each time.
    batch_size: rows per step.
    learning_rate: Adam learning rate.
    seed: seeds the shuffling.
    callback: receives `on_train_begin`, `on_train_batch_begin` and `on_epoch_end` the way
      `Model.fit` would call them (tfmot's `UpdatePruningStep` needs exactly these).
  """
  optimizer = tf.keras.optimizers.Adam(learning_rate)
  loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()
  signature = [
    tf.TensorSpec([None, train_x.shape[1]], tf.float32),
    tf.TensorSpec([None], tf.int64),
  ]

  @tf.function(autograph=False, input_signature=signature)
  def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    with tf.GradientTape() as tape:
      loss = loss_fn(y, model(x, training=True))
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
  x = np.asarray(train_x, np.float32)
  y = np.asarray(train_y, np.int64)
  for epoch in range(epochs):
    order = rng.permutation(len(x))
    for batch, start in enumerate(range(0, len(x), batch_size)):
      rows = order[start : start + batch_size]
      if callback is not None:
        callback.on_train_batch_begin(batch)
      train_step(tf.constant(x[rows]), tf.constant(y[rows]))
    if callback is not None:
      callback.on_epoch_end(epoch)


def prune(
  model: tf.keras.Model,
  train_x: np.ndarray,
  train_y: np.ndarray,
  *,
  target_sparsity: float,
  epochs: int,
  batch_size: int,
  learning_rate: float,
  seed: int = 0,
) -> tf.keras.Model:
  """Magnitude-prunes a model to `target_sparsity` while fine-tuning it, then strips the wrappers.

  Only layers tfmot can prune are wrapped (a Rescaling layer, for example, is kept as is), so
  whole models with preprocessing layers work. The PolynomialDecay schedule reaches the target
  at 70% of the fine-tuning steps, leaving the rest to recover accuracy at full sparsity.

  Args:
    model: the baseline Keras model; its layers are reused, so pass a freshly loaded copy.
    train_x: float32 train features.
    train_y: int train labels.
    target_sparsity: fraction of kernel weights to zero, in [0, 1).
    epochs: fine-tuning epochs.
    batch_size: fine-tuning batch size.
    learning_rate: Adam learning rate for fine-tuning.
    seed: seeds the fine-tuning's shuffling.

  Returns:
    The pruned model with pruning wrappers stripped (plain Keras layers with zeroed weights).
  """
  import tensorflow_model_optimization as tfmot

  sparsity = tfmot.sparsity.keras
  total_steps = max(1, epochs * math.ceil(len(train_x) / batch_size))
  # Masks change only every `frequency` steps; the final sparsity is applied at `end_step`,
  # which must be a multiple of `frequency` inside the run for the target to be reached.
  frequency = max(1, total_steps // 20)
  end_step = max(frequency, int(total_steps * PRUNING_END_FRACTION) // frequency * frequency)
  schedule = sparsity.PolynomialDecay(
    initial_sparsity=0.0,
    final_sparsity=target_sparsity,
    begin_step=0,
    end_step=end_step,
    frequency=frequency,
  )

  def wrap(layer: tf.keras.layers.Layer) -> tf.keras.layers.Layer:
    if getattr(layer, "kernel", None) is None:
      return layer
    return sparsity.prune_low_magnitude(layer, pruning_schedule=schedule)

  pruned = tf.keras.models.clone_model(model, clone_function=wrap)
  fine_tune(
    pruned,
    train_x,
    train_y,
    epochs=epochs,
    batch_size=batch_size,
    learning_rate=learning_rate,
    seed=seed,
    callback=sparsity.UpdatePruningStep(),
  )
  logging.info("Pruned for %d steps (end_step=%d, frequency=%d).", total_steps, end_step, frequency)
  return sparsity.strip_pruning(pruned)


def kernel_sparsity(model: tf.keras.Model) -> dict:
  """Measures the fraction of exactly-zero kernel weights.

  Args:
    model: a Keras model (pruning wrappers already stripped).

  Returns:
    {"overall": fraction over all kernels, "layers": {layer name: fraction}}.
  """
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
  train_x: np.ndarray,
  train_y: np.ndarray,
  *,
  epochs: int,
  batch_size: int,
  learning_rate: float,
  seed: int = 0,
) -> tuple[tf.keras.Model, str]:
  """Applies quantization-aware training with tfmot and fine-tunes briefly.

  `quantize_model` rejects whole models containing a layer it has no config for (Rescaling is
  one); then only the supported layers are annotated and the rest stay float during training.
  The int8 converter quantizes those remaining layers from the representative dataset.

  Args:
    model: the baseline Keras model (a freshly loaded copy).
    train_x: float32 train features.
    train_y: int train labels.
    epochs: fine-tuning epochs.
    batch_size: fine-tuning batch size.
    learning_rate: Adam learning rate for fine-tuning.
    seed: seeds the fine-tuning's shuffling.

  Returns:
    (the fine-tuned quantization-aware model, "whole_model" or "annotated_supported_layers").
  """
  import tensorflow_model_optimization as tfmot

  quantization = tfmot.quantization.keras
  try:
    qat_model = quantization.quantize_model(model)
    scope = "whole_model"
  except RuntimeError as error:
    logging.info("quantize_model rejected the whole model (%s); annotating layers.", error)
    registry = quantization.default_8bit.Default8BitQuantizeRegistry()

    def annotate(layer: tf.keras.layers.Layer) -> tf.keras.layers.Layer:
      return quantization.quantize_annotate_layer(layer) if registry.supports(layer) else layer

    annotated = tf.keras.models.clone_model(model, clone_function=annotate)
    with quantization.quantize_scope():
      qat_model = quantization.quantize_apply(annotated)
    scope = "annotated_supported_layers"
  fine_tune(
    qat_model,
    train_x,
    train_y,
    epochs=epochs,
    batch_size=batch_size,
    learning_rate=learning_rate,
    seed=seed,
  )
  return qat_model, scope


def to_onnx(model: tf.keras.Model, onnx_path: str) -> None:
  """Exports a Keras model to ONNX (opset 17) with a dynamic batch dimension.

  Args:
    model: the Keras model taking one float32 [batch, num_features] input.
    onnx_path: where to write the .onnx file.
  """
  import tf2onnx

  num_features = int(model.inputs[0].shape[-1])
  signature = (tf.TensorSpec([None, num_features], tf.float32, name=ONNX_INPUT_NAME),)
  tf2onnx.convert.from_keras(
    model, input_signature=signature, opset=ONNX_OPSET, output_path=onnx_path
  )
