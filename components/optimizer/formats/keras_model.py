"""The trained model as every format takes it: a restored call as a Keras layer, and its export."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from components.optimizer.formats import runtime_base


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
  """The RestoredCall layer of a model wrapping a restored function.

  Args:
    model: the baseline Keras model.

  Returns:
    Its RestoredCall layer, or None for a model Keras saved with its config.
  """
  return next((x for x in model.layers if isinstance(x, RestoredCall)), None)


def export_saved_model(model: tf.keras.Model, export_dir: str) -> str:
  """Saves a model for the converters: one `serving_default` signature over its named inputs.

  Keras' per-layer traces are not saved (save_traces=False): the converters need only the
  signature, and tracing every layer is slow. A model wrapping a restored function is saved
  through the restored object, because Keras' save of the wrapper is much slower.

  Args:
    model: the Keras model, its inputs named.
    export_dir: the folder to write.

  Returns:
    `export_dir`.
  """
  signature = tf.function(lambda inputs: {"output_0": model(inputs, training=False)})
  signature = signature.get_concrete_function(runtime_base.model_specs(model))
  restored = restored_call(model)
  if restored is not None:
    tf.saved_model.save(restored.restored, export_dir, signatures=signature)
    return export_dir
  model.save(
    export_dir,
    save_format="tf",
    include_optimizer=False,
    save_traces=False,
    signatures=signature,
  )
  return export_dir
