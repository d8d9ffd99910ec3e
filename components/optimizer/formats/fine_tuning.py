"""Model changes that need training, by distillation: magnitude pruning and QAT with tfmot."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from components.optimizer import formats
from components.optimizer.formats import runtime_base

_LOG = logging.getLogger(__name__)
# tfmot is a dependency of the kit; named here so that a broken install says what to reinstall.
_TFMOT = ("tensorflow_model_optimization", "tensorflow-model-optimization")

# Fraction of the fine-tuning steps after which pruning reaches its target sparsity.
PRUNING_END_FRACTION = 0.6
# Layers with fewer kernel weights than this are left whole (a classifier's head: ten classes
# over 64 units keep 6 weights each at 90%, which costs accuracy and saves a few hundred bytes);
# the others are pruned harder so that the model as a whole still reaches the target.
MIN_PRUNED_WEIGHTS = 1024
# The most any one layer is pruned to make up for the layers left whole.
MAX_LAYER_SPARSITY = 0.97


def distill(
  model: tf.keras.Model,
  inputs: runtime_base.Inputs,
  targets: np.ndarray,
  *,
  epochs: int,
  batch_size: int,
  learning_rate: float,
  seed: int = 0,
  callback: tf.keras.callbacks.Callback | None = None,
) -> None:
  """Fine-tunes `model` to reproduce `targets` (the baseline's outputs) on `inputs`.

  Distillation needs neither labels nor the model's own loss, so it works for any task and any
  module. The loss is the mean squared difference, scaled by the targets' variance so that it means
  the same for probabilities and for regression values. A plain loop around one
  `tf.function(autograph=False)` step instead of `Model.fit`:
  - Autograph would transpile every tfmot wrapper on the first trace, which is slow; the tfmot
    wrappers use explicit `tf.cond`, so they need no conversion.
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
  # Its moments now, not in the step's first trace: a tf.function that creates variables is
  # traced a second time on its next call.
  optimizer.build(model.trainable_variables)
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
  n = runtime_base.rows(inputs)
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


def prune(
  model: tf.keras.Model,
  inputs: runtime_base.Inputs,
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
  tfmot = formats.backend(*_TFMOT)
  if not any(_prunable(layer) for layer in model.layers):
    raise ValueError("the model has no Dense or convolution layer at its top level to prune")
  sparsity = tfmot.sparsity.keras
  total_steps = max(1, epochs * math.ceil(runtime_base.rows(inputs) / batch_size))
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
  _LOG.info("Pruned for %d steps (end_step=%d, frequency=%d).", total_steps, end_step, frequency)
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
  inputs: runtime_base.Inputs,
  targets: np.ndarray,
  *,
  epochs: int,
  batch_size: int,
  learning_rate: float,
  seed: int = 0,
  keep_float: Sequence[str] = (),
) -> tuple[tf.keras.Model, str]:
  """Applies quantization-aware training with tfmot and distils briefly.

  The Dense and convolution layers train with fake quantization; the rest stay float during
  training and the int8 converter quantizes them from the representative dataset.

  Args:
    model: the baseline Keras model; pass a freshly loaded copy.
    inputs: train sample, input name -> array.
    targets: the baseline's outputs on that sample.
    epochs: fine-tuning epochs.
    batch_size: fine-tuning batch size.
    learning_rate: Adam learning rate for fine-tuning.
    seed: seeds the fine-tuning's shuffling.
    keep_float: layers left unannotated because int8 keeps them float (the preprocessing).

  Returns:
    (the fine-tuned quantization-aware model, which layers were annotated).
  """
  tfmot = formats.backend(*_TFMOT)
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
  keep_float = set(keep_float)
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
