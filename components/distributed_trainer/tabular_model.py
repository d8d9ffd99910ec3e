"""The default model: raw columns in, preprocessing layers, a network, the task's head; its
evaluation and its export (a SavedModel any client can call). Its input is tabular_input's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from components import model_contract, tasks
from components.distributed_trainer.tabular_input import label_target
from components.distributed_trainer.tabular_profile import ColumnStats, Profile, TabularInputError
from components.model_contract import CATEGORICAL, NUMERIC

DEFAULT_HPARAMS: dict[str, Any] = {
  # None: sized to the training rows (`hidden_units_for`).
  "hidden_units": None,
  "num_layers": 2,
  "learning_rate": 1e-3,
  "dropout": 0.0,
  # Quantile bins per numeric column (piecewise-linear encoding); 0 turns them off.
  "numeric_bins": 16,
  # Text values seen fewer times than this in training go to the out-of-vocabulary slot.
  "min_category_count": 2,
  "max_vocabulary": 1000,
  # Text columns with more values than this are embedded instead of one-hot encoded.
  "one_hot_max": 32,
  "max_classes": tasks.DEFAULT_MAX_CLASSES,
}
# The signature that takes one named value per column (TF Serving's REST `instances`).
ROWS_SIGNATURE = model_contract.ROWS_SIGNATURE

Body = Callable[[Any, dict[str, Any]], Any]


def check_hparams(hparams: dict[str, Any], allow_extra: bool = False) -> dict[str, Any]:
  """The hyper-parameters with their defaults, checked.

  Args:
    hparams: --hparams (and the Tuner's values).
    allow_extra: accept names the default model does not know (a build_model module's network
      reads its own).

  Raises:
    TabularInputError: for an unknown name or a value of the wrong kind or range.
  """
  unknown = sorted(set(hparams) - set(DEFAULT_HPARAMS) - {"batch_size", "max_epochs"})
  if unknown and not allow_extra:
    raise TabularInputError(
      f"unknown hyper-parameter(s) {', '.join(unknown)}; use "
      f"{', '.join(sorted([*DEFAULT_HPARAMS, 'batch_size', 'max_epochs']))}."
    )
  out = {**DEFAULT_HPARAMS, **hparams}
  for name in ("hidden_units", "num_layers", "max_vocabulary", "max_classes"):
    if out[name] is not None or name != "hidden_units":
      _check_number(name, out[name], int, 1)
  for name in ("numeric_bins", "min_category_count", "one_hot_max"):
    _check_number(name, out[name], int, 0)
  for name in ("batch_size", "max_epochs"):
    if name in out:
      _check_number(name, out[name], int, 1)
  _check_number("learning_rate", out["learning_rate"], float, 0, exclusive=True)
  _check_number("dropout", out["dropout"], float, 0)
  if float(out["dropout"]) >= 1:
    raise TabularInputError(
      f"hyper-parameter dropout={out['dropout']} must be below 1, e.g. {_example('dropout')}."
    )
  return out


# Values shown in messages as the expected form, where the default is not a good example.
_EXAMPLES = {"hidden_units": 128, "batch_size": 256, "max_epochs": 100, "dropout": 0.1}


def _example(name: str) -> str:
  return f"--hparams {name}={_EXAMPLES.get(name, DEFAULT_HPARAMS.get(name))}"


def _check_number(name: str, value: Any, kind: type, low: float, exclusive: bool = False) -> None:
  """Refuses a value of the wrong kind or range, showing the form that works."""
  bound = f"{'above' if exclusive else 'at least'} {low}"
  of_bound = bound if exclusive else f"of {bound}"
  try:
    number = kind(value)
    whole = kind is not int or float(value) == number
  except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
    number, whole = None, False
  if not whole:
    kind_name, form = ("an integer", "a whole number") if kind is int else ("a number", "a number")
    raise TabularInputError(
      f"hyper-parameter {name}={value!r} is not {kind_name}; pass {form} {of_bound}, e.g. "
      f"{_example(name)}."
    )
  if not math.isfinite(number) or number < low or (exclusive and number == low):
    raise TabularInputError(
      f"hyper-parameter {name}={value!r} must be {bound}, e.g. {_example(name)}."
    )


def hidden_units_for(rows: int) -> int:
  """Width of the hidden layers for a training set: 64 under 2,000 rows, 128 under 20,000,
  256 from there, so that small tables do not get more capacity than their rows support."""
  if rows < 2_000:
    return 64
  return 128 if rows < 20_000 else 256


def _head_size(label: tasks.LabelInfo) -> int:
  return len(label.classes) if label.task == tasks.MULTICLASS else 1


def model_hparams(profile: Profile, hparams: dict[str, Any], width: int) -> dict[str, Any]:
  """The hyper-parameters a model body is built from: user values plus the data's shape."""
  return {
    **DEFAULT_HPARAMS,
    **hparams,
    "task": profile.label.task,
    "num_features": int(width),
    "num_classes": max(len(profile.label.classes), 1),
    "num_outputs": _head_size(profile.label),
    "feature_keys": [s.column.name for s in profile.columns],
  }


def default_body(x, hparams: dict[str, Any]):
  """The default network on the preprocessed vector: ReLU layers with dropout, then the head.

  Args:
    x: the preprocessed float32 [batch, num_features] KerasTensor.
    hparams: hidden_units, num_layers, dropout, num_outputs.

  Returns:
    The head's KerasTensor before the task's activation: logits, or a standardized value.
  """
  import tensorflow as tf

  for i in range(int(hparams["num_layers"])):
    x = tf.keras.layers.Dense(int(hparams["hidden_units"]), activation="relu", name=f"hidden_{i}")(
      x
    )
    if float(hparams["dropout"]) > 0:
      x = tf.keras.layers.Dropout(float(hparams["dropout"]), name=f"dropout_{i}")(x)
  return tf.keras.layers.Dense(int(hparams["num_outputs"]), name="head")(x)


def _task_output(x, profile: Profile):
  """The task's output on the head: probabilities, a probability, or a value in label units.

  It runs in float32 so probabilities stay exact under mixed precision policies. A regression
  head learns the standardized label; the last layer puts it back in the label's units.
  """
  import tensorflow as tf

  task = profile.label.task
  if task == tasks.MULTICLASS:
    return tf.keras.layers.Activation("softmax", dtype="float32", name="probabilities")(x)
  if task == tasks.BINARY:
    return tf.keras.layers.Activation("sigmoid", dtype="float32", name="probability")(x)
  return tf.keras.layers.Rescaling(
    scale=profile.label_std, offset=profile.label_mean, dtype="float32", name="value"
  )(x)


def embedding_size(vocabulary_size: int) -> int:
  """Embedding width for a text column: grows slowly with its vocabulary, 4 to 32."""
  return int(min(32, max(4, round(1.6 * (vocabulary_size + 2) ** 0.56))))


def _text_part(s: ColumnStats, inputs, hp: dict[str, Any]):
  import tensorflow as tf

  from components import preprocessing_layers as layers

  name = s.column.input_name
  if s.date is not None:
    return layers.DateFeatures(
      s.date.day_mean, s.date.day_scale, s.date.with_time, name=f"date_{name}"
    )(inputs)
  one_hot = layers.CategoryOneHot(s.vocabulary, s.may_be_missing, name=f"one_hot_{name}")(inputs)
  if len(s.vocabulary) <= int(hp["one_hot_max"]):
    return one_hot
  # An embedding, as a linear layer on the one-hot: the same function as a lookup, but
  # without a GATHER, so TFLite's int8 quantizes it like the rest of the network.
  return tf.keras.layers.Dense(
    embedding_size(len(s.vocabulary)), use_bias=False, name=f"embedding_{name}"
  )(one_hot)


def build_model(profile: Profile, hparams: dict[str, Any], body: Body | None = None):
  """Builds the whole model: raw inputs -> preprocessing layers -> body -> the task's output.

  Numbers: imputed, standardized and clipped, with missing indicators, plus piecewise-linear
  quantile bins. Text: one-hot over its vocabulary, or an embedding when it has more than
  `one_hot_max` values. Dates: trend and seasons (DateFeatures).

  Args:
    profile: statistics and label of the training data.
    hparams: user hyper-parameters (see DEFAULT_HPARAMS).
    body: builds the head's output from the preprocessed vector and the model hparams; None
      for `default_body`.

  Returns:
    An uncompiled functional tf.keras.Model taking a dict of inputs (model_contract's).
  """
  import tensorflow as tf

  from components import preprocessing_layers as layers

  hp = {**DEFAULT_HPARAMS, **hparams}
  if hp["hidden_units"] is None:
    hp["hidden_units"] = hidden_units_for(profile.rows)
  inputs = {}
  parts = []
  numeric = [s for s in profile.columns if s.column.kind == NUMERIC]
  if numeric:
    name = model_contract.NUMERIC_INPUT
    inputs[name] = tf.keras.Input(shape=(len(numeric),), dtype=tf.float32, name=name)
    parts.append(
      layers.NumericPreprocessing(
        [s.mean for s in numeric],
        [s.std for s in numeric],
        [s.may_be_missing for s in numeric],
        name="numeric_preprocessing",
      )(inputs[name])
    )
    if int(hp["numeric_bins"]) and any(s.edges for s in numeric):
      parts.append(
        layers.NumericBins([s.edges for s in numeric], [s.mean for s in numeric], name="bins")(
          inputs[name]
        )
      )
  for s in profile.columns:
    if s.column.kind == CATEGORICAL:
      name = s.column.input_name
      inputs[name] = tf.keras.Input(shape=(1,), dtype=tf.string, name=name)
      parts.append(_text_part(s, inputs[name], hp))
  x = parts[0] if len(parts) == 1 else tf.keras.layers.Concatenate(name="preprocessed")(parts)
  full = model_hparams(profile, hp, x.shape[-1])
  outputs = _task_output((body or default_body)(x, full), profile)
  return tf.keras.Model(inputs=inputs, outputs=outputs, name="tabular_model")


def build_model_adapter(build_model_fn: Callable[[dict[str, Any]], Any]) -> Body:
  """Turns a `build_model(hparams)` module function into a model body.

  The module's model takes the preprocessed float32 [batch, hparams['num_features']] vector
  and returns [batch, hparams['num_outputs']]: logits (classification) or the standardized
  value (regression); the trainer adds the softmax, sigmoid or rescaling.
  """

  def body(x, hparams):
    model = build_model_fn(dict(hparams))
    _check_user_model(model, hparams)
    return model(x)

  return body


def _check_user_model(model, hparams: dict[str, Any]) -> None:
  import tensorflow as tf

  if not isinstance(model, tf.keras.Model):
    raise TabularInputError(
      f"build_model returned {type(model).__name__}; it must return a tf.keras.Model."
    )
  inputs = getattr(model, "inputs", None)
  if not inputs or len(inputs) != 1 or inputs[0].shape[-1] != hparams["num_features"]:
    raise TabularInputError(
      "build_model must return a model with ONE float input of shape "
      f"[batch, {hparams['num_features']}] (hparams['num_features']); got inputs {inputs}."
    )
  if model.outputs[0].shape[-1] != hparams["num_outputs"]:
    raise TabularInputError(
      f"build_model returned {model.outputs[0].shape[-1]} outputs; for a "
      f"{hparams['task']} label it must return hparams['num_outputs']={hparams['num_outputs']}."
    )


def compile_model(model, profile: Profile, learning_rate: float, steps_per_execution: int) -> None:
  """Compiles with Adam and the task's loss and metric (named 'accuracy' or 'rmse').

  A regression's loss is the mean squared error in units of the label's standard deviation,
  which is what training on the standardized label minimizes.
  """
  import tensorflow as tf

  task = profile.label.task
  if task == tasks.MULTICLASS:
    loss = tf.keras.losses.SparseCategoricalCrossentropy()
    metric = tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")
  elif task == tasks.BINARY:
    loss = tf.keras.losses.BinaryCrossentropy()
    metric = tf.keras.metrics.BinaryAccuracy(name="accuracy")
  else:
    scale = 1.0 / (profile.label_std**2)

    def loss(y_true, y_pred):
      return tf.reduce_mean(tf.square(y_true - y_pred), axis=-1) * scale

    metric = tf.keras.metrics.RootMeanSquaredError(name="rmse")
  model.compile(
    optimizer=tf.keras.optimizers.Adam(learning_rate),
    loss=loss,
    metrics=[metric],
    steps_per_execution=steps_per_execution,
  )


# ----------------------------------------------------------------------------- evaluation


def evaluate(model, dataset, task: str) -> dict[str, float]:
  """The task's metric of a model over (features, target) batches.

  Returns:
    {"accuracy": ...} for classification (rows whose label is outside the class vocabulary
    count as wrong), {"rmse": ..., "mae": ...} for regression, plus "examples".
  """
  correct = total = 0
  sq = ab = 0.0
  for features, target in dataset:
    pred = model(features, training=False).numpy()
    y = target.numpy()
    if task == tasks.MULTICLASS:
      correct += int((pred.argmax(axis=1) == y).sum())
    elif task == tasks.BINARY:
      correct += int(((pred[:, 0] >= 0.5) == (y[:, 0] == 1)).sum())
    else:
      err = pred[:, 0].astype(np.float64) - y[:, 0]
      sq += float(np.square(err).sum())
      ab += float(np.abs(err).sum())
    total += len(y)
  if not total:
    raise TabularInputError(
      "the eval split is empty; give the ExampleGen more rows or a larger eval share."
    )
  if task == tasks.REGRESSION:
    return {"rmse": math.sqrt(sq / total), "mae": ab / total, "examples": total}
  return {"accuracy": correct / total, "examples": total}


# ----------------------------------------------------------------------------- export


def export_saved_model(model, profile: Profile, export_dir: str) -> None:
  """Saves the serving SavedModel: raw tf.Examples (or named values) in, the task's outputs out.

  Signatures:
    serving_default: `examples` (serialized tf.Examples) -> {"outputs": ...}.
    rows: one named input per column (see `model_contract.rows_signature`) -> {"outputs": ...}.
    transform_features: `examples` -> {label key: the label as the model is trained against
      it}; TFMA evaluates with it (`preprocessing_function_names`).

  The contract (model_contract.ModelContract) is written to assets.extra/contract.json.
  """
  import tensorflow as tf

  columns = [s.column for s in profile.columns]
  spec = [tf.TensorSpec([None], tf.string, name=model_contract.SERVING_INPUT)]

  @tf.function(input_signature=spec)
  def transform_features(examples):
    label = model_contract.parse_label(examples, profile.label.key, profile.label_dtype)
    return {profile.label.key: label_target(label, profile.label, profile.label_dtype)}

  model.save(
    export_dir,
    save_format="tf",
    include_optimizer=False,
    signatures={
      "serving_default": model_contract.examples_signature(model, columns),
      ROWS_SIGNATURE: model_contract.rows_signature(model, columns),
      model_contract.TRANSFORM_SIGNATURE: transform_features.get_concrete_function(),
    },
  )
  model_contract.write_contract(export_dir, contract_of(profile))


def contract_of(profile: Profile) -> model_contract.ModelContract:
  """The model contract of a model built from `profile`."""

  def column(s: ColumnStats) -> dict[str, Any]:
    entry = {
      "column": s.column.name,
      "kind": "date" if s.date is not None else s.column.kind,
      "stored_as": s.column.dtype,
      "may_be_missing": s.may_be_missing,
      "rows_input": model_contract.rows_key(s.column.name),
    }
    if s.column.kind == CATEGORICAL and s.date is None:
      entry["vocabulary_size"] = len(s.vocabulary)
    return entry

  inputs = []
  numeric = [s for s in profile.columns if s.column.kind == NUMERIC]
  if numeric:
    inputs.append(
      {
        "name": model_contract.NUMERIC_INPUT,
        "dtype": "float32",
        "shape": [-1, len(numeric)],
        "missing_value": "NaN",
        "columns": [column(s) for s in numeric],
      }
    )
  for s in profile.columns:
    if s.column.kind == CATEGORICAL:
      inputs.append(
        {
          "name": s.column.input_name,
          "dtype": "string",
          "shape": [-1, 1],
          "missing_value": "",
          "columns": [column(s)],
        }
      )
  return model_contract.ModelContract(
    task=profile.label.task,
    label={**profile.label.to_json(), "stored_as": profile.label_dtype},
    inputs=inputs,
    output=model_contract.output_meaning(profile.label.task, profile.label.classes),
  )
