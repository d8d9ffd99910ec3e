"""The `pruned` format: tfmot magnitude pruning, distilled, shipped as a plain TF SavedModel."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.function.polymorphism.function_type import sanitize_arg_name
from tensorflow.core.protobuf import saved_model_pb2

from components import model_contract
from components.optimizer import formats
from components.optimizer.formats import fine_tuning, runtime_base
from components.optimizer.formats.variant_base import Conversion, ConversionContext, Variant
from core import defaults


class SavedModelRuntime(runtime_base.Runtime):
  """One signature of a SavedModel, loaded with `tf.saved_model.load` alone.

  No Keras and none of this project's code is needed to load it: that is what a client of the
  serving folder has, so the variant is measured the way it will be called.
  """

  name = "tensorflow"

  def __init__(self, path: str, signature_key: str):
    self._loaded = tf.saved_model.load(path)
    self._key = signature_key
    self._fn = self._loaded.signatures[signature_key]
    # The inputs go by their SignatureDef names (TF Serving's, and the Keras model's input
    # names); the loaded function takes each as TensorFlow renames it into a Python argument
    # (`text_W.Hnd`, a column `W.Hnd`, as `text_W_Hnd`).
    args = dict(self._fn.structured_input_signature[1])
    renamed = {
      name: sanitize_arg_name(name) for name in _signature_input_names(path, signature_key)
    }
    self._specs = {name: (arg, args[arg]) for name, arg in renamed.items()}
    self._output = sorted(self._fn.structured_outputs)[0]

  def predict(self, batch: runtime_base.Inputs) -> np.ndarray:
    feed = {arg: tf.constant(batch[name], dtype=s.dtype) for name, (arg, s) in self._specs.items()}
    return self._fn(**feed)[self._output].numpy()

  def signature(self) -> dict[str, Any]:
    return {
      "signature_key": self._key,
      "inputs": [
        {"name": k, "dtype": s.dtype.name, "shape": [-1 if d is None else d for d in s.shape]}
        for k, (_, s) in self._specs.items()
      ],
      "outputs": [{"name": self._output, "dtype": "float32"}],
    }

  def close(self) -> None:
    self._fn = None
    self._loaded = None


def _signature_input_names(path: str, signature_key: str) -> list[str]:
  """The input names of a SavedModel signature, as its SignatureDef (and TF Serving) has them."""
  saved = saved_model_pb2.SavedModel()
  with tf.io.gfile.GFile(os.path.join(path, "saved_model.pb"), "rb") as f:
    saved.ParseFromString(f.read())
  return sorted(saved.meta_graphs[0].signature_def[signature_key].inputs)


def _pruned_h5(context: ConversionContext) -> tuple[str, dict]:
  """Prunes and distils the baseline once per run; (its stripped h5, its kernel sparsity)."""

  def build() -> tuple[str, dict]:
    pruned = fine_tuning.prune(
      context.load_baseline(),
      context.train_inputs,
      context.train_targets,
      target_sparsity=context.config.target_sparsity,
      **context.fine_tune_kwargs(),
    )
    path = os.path.join(context.scratch_dir, "pruned.h5")
    pruned.save(path, include_optimizer=False)
    return path, fine_tuning.kernel_sparsity(pruned)

  return context.shared("pruned/h5", build)


def pruned_model(context: ConversionContext) -> tuple[tf.keras.Model, dict]:
  """The pruned model, loaded once per run from its h5, and details to report about it.

  `pruned` saves it and `pruned_int8` (a TFLite variant) converts it; neither modifies it.

  Args:
    context: the run's conversion context.

  Returns:
    (the pruned Keras model, {"sparsity": kernel sparsity measured from its weights}).
  """

  def load() -> tuple[tf.keras.Model, dict]:
    path, sparsity = _pruned_h5(context)
    return tf.keras.models.load_model(path, compile=False), {"sparsity": sparsity}

  return context.shared("pruned/model", load)


def pruning_skip_reason(context: ConversionContext) -> str | None:
  """Why the pruned variants cannot run on this baseline.

  Args:
    context: the run's conversion context.

  Returns:
    The reason, or None when the baseline's Keras layers can be rebuilt.
  """
  return context.keras_layers_missing("pruning", "pruned variants")


@formats.register
class PrunedVariant(Variant):
  """Magnitude pruning with distillation, shipped as a SavedModel that TensorFlow alone loads.

  Its `model_inputs` signature takes the Keras model's inputs by name (what signature.json
  lists and the Optimizer measures). A model with a contract (the default model) also gets the
  trainer's serving signatures: `serving_default` over serialized tf.Examples and `rows` over
  one named value per column, with contract.json beside them, so TF Serving serves the pruned
  model exactly as it serves the trained one.
  """

  name = defaults.PRUNED
  runtime = SavedModelRuntime.name
  builds_models = True

  def skip_reason(self, context: ConversionContext) -> str | None:
    return pruning_skip_reason(context)

  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    model, details = pruned_model(context)
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

  def load(self, out_dir: str, conversion: Conversion) -> runtime_base.Runtime:
    del conversion
    return SavedModelRuntime(out_dir, model_contract.MODEL_INPUTS_SIGNATURE)
