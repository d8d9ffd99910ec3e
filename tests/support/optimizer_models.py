"""Small dict-input Keras models and optimize() options for the Optimizer's tests."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from components.optimizer import optimizer_lib, run_config
from components.optimizer.formats import runtime_base
from models.tabular import layers as preprocessing_layers
from tests.support import tabular_data as td

COLUMNS = {"numeric": list(td.NUMERIC), "text_color": ["color"]}
MISSING = {"numeric": "NaN", "text_color": ""}


def sample(task: str, rows: int, seed: int):
  """(model inputs, label targets) of `rows` generated rows."""
  data = td.make_rows(rows, task, seed)
  return td.model_inputs(data), td.label_targets(data, task)


def build_model(task: str, train_inputs, activation: str = "relu") -> tf.keras.Model:
  """A dict-input model as the trainer builds it: preprocessing layers, then a small MLP."""
  tf.keras.utils.set_random_seed(0)
  numbers = train_inputs["numeric"]
  numeric = tf.keras.Input((len(td.NUMERIC),), name="numeric")
  color = tf.keras.Input((1,), dtype=tf.string, name="text_color")
  x = tf.keras.layers.Concatenate()(
    [
      preprocessing_layers.NumericPreprocessing(
        np.nanmean(numbers, 0), np.nanstd(numbers, 0), np.isnan(numbers).any(0)
      )(numeric),
      preprocessing_layers.CategoryOneHot(list(td.COLORS), missing_slot=True)(color),
    ]
  )
  x = tf.keras.layers.Dense(64, activation=activation)(x)
  x = tf.keras.layers.Dense(64, activation="relu")(x)
  if task == "regression":
    outputs, loss = tf.keras.layers.Dense(1)(x), "mse"
  else:
    outputs = tf.keras.layers.Dense(3, activation="softmax")(x)
    loss = "sparse_categorical_crossentropy"
  model = tf.keras.Model({"numeric": numeric, "text_color": color}, outputs)
  model.compile(tf.keras.optimizers.Adam(0.01), loss, steps_per_execution=10)
  return model


def train(task: str, train_inputs, labels, epochs: int = 20, activation: str = "relu"):
  """`build_model`, fitted on the rows."""
  model = build_model(task, train_inputs, activation)
  feed = {k: v.astype(bytes) if v.dtype == object else v for k, v in train_inputs.items()}
  model.fit(feed, labels, epochs=epochs, batch_size=64, verbose=0)
  return model


def facts(task: str) -> run_config.ModelFacts:
  """ModelFacts of the generated data's columns."""
  return run_config.ModelFacts(
    task=task,
    label_key="label",
    classes=td.CLASSES.get(task, ()),
    output="what the output means",
    columns=COLUMNS,
    missing=MISSING,
  )


def quick(variant_names, **options) -> run_config.OptimizerConfig:
  """Options for a short run: no TensorRT, few latency runs."""
  options = {"tensorrt": "off", "latency_runs": 20, "warmup_runs": 2, **options}
  return run_config.OptimizerConfig(variants=tuple(variant_names), **options)


def run(model, data, output_dir: str, config) -> dict:
  """optimize() on (train inputs, train labels, eval inputs, eval labels) of the multiclass data."""
  train_inputs, _, eval_inputs, eval_labels = data
  return optimizer_lib.optimize(
    model, train_inputs, eval_inputs, eval_labels, output_dir, facts("multiclass"), config
  )


def by_name(result: dict) -> dict:
  """A report's variant rows by name."""
  return {entry["name"]: entry for entry in result["variants"]}


def keras_outputs(model, inputs):
  """The model's outputs, as the Optimizer's baseline runtime gives them."""
  return runtime_base.predict_batched(runtime_base.KerasRuntime(model), inputs)
