"""The default model: raw columns in, preprocessing layers, a network, the task's head; its
evaluation and its export (a SavedModel any client can call). Its input is inputs.py's.

Importing it registers its Keras layers (layers.py), so whoever imports the trainer module that
built a model (the Optimizer, by the Model's trainer_module) loads it as this Keras model.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from components import model_contract
from components.model_contract import CATEGORICAL, NUMERIC, label_target
from core import tasks
from models.tabular import layers, readings
from models.tabular.hparams import DEFAULT_HPARAMS, hidden_units_for
from models.tabular.profile import ColumnStats, Profile, TabularInputError

Body = Callable[[Any, dict[str, Any]], Any]

# The contract's kind of a free-text column (read as words); dates are "date".
FREE_TEXT = "free_text"
TEXT_NUMBER = "text_number"


def _head_size(profile: Profile) -> int:
  label = profile.label
  if label.task != tasks.MULTICLASS:
    return 1
  return len(label.classes) + (1 if profile.readings else 0)


def model_hparams(profile: Profile, hparams: dict[str, Any], width: int) -> dict[str, Any]:
  """The hyper-parameters a model body is built from: user values plus the data's shape."""
  return {
    **DEFAULT_HPARAMS,
    **hparams,
    "task": profile.label.task,
    "num_features": int(width),
    "num_classes": max(len(profile.label.classes), 1),
    "num_outputs": _head_size(profile),
    "feature_keys": [s.column.name for s in profile.columns],
  }


def hidden_layer_name(index: int, suffix: str = "") -> str:
  """The name of the default network's hidden layer `index` (`suffix`: an ensemble member's)."""
  return f"hidden_{index}{suffix}"


def default_body(x, hparams: dict[str, Any], suffix: str = ""):
  """The default network on the preprocessed vector: ReLU layers with dropout, then the head.

  Args:
    x: the preprocessed float32 [batch, num_features] KerasTensor.
    hparams: hidden_units, num_layers, dropout, num_outputs.
    suffix: appended to the layer names (an ensemble member's, see `build_model`).

  Returns:
    The head's KerasTensor before the task's activation: logits, or a standardized value.
  """
  import tensorflow as tf

  for i in range(int(hparams["num_layers"])):
    units = int(hparams["hidden_units"])
    x = tf.keras.layers.Dense(units, activation="relu", name=hidden_layer_name(i, suffix))(x)
    if float(hparams["dropout"]) > 0:
      x = tf.keras.layers.Dropout(float(hparams["dropout"]), name=f"dropout_{i}{suffix}")(x)
  return tf.keras.layers.Dense(int(hparams["num_outputs"]), name=f"head{suffix}")(x)


def _task_output(x, profile: Profile, suffix: str = ""):
  """The task's output on the head: probabilities, a probability, or a value in label units.

  It runs in float32 so probabilities stay exact under mixed precision policies. A regression
  head learns the standardized label; the last layer puts it back in the label's units.
  """
  import tensorflow as tf

  task = profile.label.task
  if profile.readings:
    return layers.BothReadings(
      len(profile.label.classes),
      profile.label_mean,
      profile.label_std,
      dtype="float32",
      name=f"readings{suffix}",
    )(x)
  if task == tasks.MULTICLASS:
    return tf.keras.layers.Activation("softmax", dtype="float32", name=f"probabilities{suffix}")(x)
  if task == tasks.BINARY:
    return tf.keras.layers.Activation("sigmoid", dtype="float32", name=f"probability{suffix}")(x)
  return tf.keras.layers.Rescaling(
    scale=profile.label_std, offset=profile.label_mean, dtype="float32", name=f"value{suffix}"
  )(x)


def embedding_size(vocabulary_size: int) -> int:
  """Embedding width for a text column: grows slowly with its vocabulary, 4 to 32."""
  return int(min(32, max(4, round(1.6 * (vocabulary_size + 2) ** 0.56))))


def _text_part(s: ColumnStats, inputs, hp: dict[str, Any], suffix: str = ""):
  import tensorflow as tf

  name = f"{s.column.input_name}{suffix}"
  if s.number:
    value = layers.TextNumber(name=f"text_number_{name}")(inputs)
    parts = [layers.NumericPreprocessing([s.mean], [s.std], [True], name=f"number_{name}")(value)]
    if int(hp["numeric_bins"]) and s.edges:
      parts.append(layers.NumericBins([s.edges], [s.mean], name=f"number_bins_{name}")(value))
    return (
      parts[0]
      if len(parts) == 1
      else tf.keras.layers.Concatenate(name=f"number_parts_{name}")(parts)
    )
  if s.date is not None:
    date = s.date
    return layers.DateFeatures(
      date.day_mean, date.day_scale, date.with_time, date.edges, date.order, name=f"date_{name}"
    )(inputs)
  if s.free_text:
    one_hot = layers.WordsMultiHot(s.vocabulary, s.may_be_missing, name=f"words_{name}")(inputs)
  else:
    one_hot = layers.CategoryOneHot(s.vocabulary, s.may_be_missing, name=f"one_hot_{name}")(inputs)
  if len(s.vocabulary) <= int(hp["one_hot_max"]):
    return one_hot
  # An embedding, as a linear layer on the one-hot: the same function as a lookup, but
  # without a GATHER, so TFLite's int8 quantizes it like the rest of the network.
  return tf.keras.layers.Dense(
    embedding_size(len(s.vocabulary)), use_bias=False, name=f"embedding_{name}"
  )(one_hot)


# The layer that averages an ensemble's members (`build_model`), and each member's name suffix.
ENSEMBLE_LAYER = "ensemble"


def member_suffix(index: int) -> str:
  return model_contract.MEMBER_SUFFIX.format(index=index)


def is_plain_member(index: int) -> bool:
  """Whether an ensemble's member `index` is built like a single network (`member_hparams`)."""
  return index % 2 == 0


def member_hparams(hp: dict[str, Any], index: int) -> dict[str, Any]:
  """The hyper-parameters of an ensemble's member `index`: every other member (the second, the
  fourth, ...) is the simpler network, with one hidden layer fewer (at least one) and its
  numbers without their quantile bins, which tables a linear model wins need (see
  docs/your-data.md). Dates keep theirs."""
  if is_plain_member(index):
    return hp
  return {**hp, "num_layers": max(1, int(hp["num_layers"]) - 1), "numeric_bins": 0}


def linear_hparams(hp: dict[str, Any]) -> dict[str, Any]:
  """The hyper-parameters of an ensemble's linear member: no hidden layer (the head on the
  preprocessed vector) and numbers without their quantile bins (dates keep theirs)."""
  return {**hp, "num_layers": 0, "numeric_bins": 0, "dropout": 0.0}


def member_shares(members: int, linear_share: float) -> list[float]:
  """The output weights of an ensemble with a linear member: the networks' equal shares, then
  the linear member's `linear_share`."""
  return [(1.0 - linear_share) / members] * members + [float(linear_share)]


def build_model(
  profile: Profile,
  hparams: dict[str, Any],
  body: Body | None = None,
  members: int = 1,
  seed: int | None = None,
  linear_share: float | None = None,
):
  """Builds the whole model: raw inputs -> preprocessing layers -> body -> the task's output.

  Numbers: imputed, standardized and clipped, with missing indicators, plus piecewise-linear
  quantile bins. Text: one-hot over its vocabulary, or an embedding when it has more than
  `one_hot_max` values; free text the same over its words (WordsMultiHot). Dates: trend,
  seasons and quantile bins of the days (DateFeatures).

  With `members` > 1 (a body that `names_members`) the model is an ensemble: that many networks
  with their own preprocessing on the same inputs, every other one simpler (`member_hparams`),
  their layers named with `member_suffix`, each initialized from `seed` + its index, and their
  outputs (probabilities or values) averaged by the ENSEMBLE_LAYER. Each member is trained on
  its own (`ensemble_members`). With `linear_share`, a linear model on the same inputs
  (`linear_hparams`, the default network without hidden layers whatever `body` is) is the last
  member, with its own preprocessing and that share of the output; the networks share the rest
  equally (`member_shares`).

  Args:
    profile: statistics and label of the training data.
    hparams: user hyper-parameters (see DEFAULT_HPARAMS).
    body: builds the head's output from the preprocessed vector and the model hparams; None
      for `default_body`.
    members: networks averaged (1: a single network).
    seed: the first member's initialization seed (None: the global random state as it is).
    linear_share: the linear member's share of the output, from 0 to 1 (None: no linear
      member). Only with `members` > 1.

  Returns:
    An uncompiled functional tf.keras.Model taking a dict of inputs (model_contract's).
  """
  import tensorflow as tf

  if members > 1 and not names_members(body):
    raise ValueError("an ensemble's network must take a `suffix` for its layer names")
  if linear_share is not None and members < 2:
    raise ValueError("a linear member is part of an ensemble of at least 2 networks")
  hp = {**DEFAULT_HPARAMS, **hparams}
  if hp["hidden_units"] is None:
    hp["hidden_units"] = hidden_units_for(profile.rows)
  numeric = [s for s in profile.columns if s.column.kind == NUMERIC]
  inputs = {}
  if numeric:
    name = model_contract.NUMERIC_INPUT
    inputs[name] = tf.keras.Input(shape=(len(numeric),), dtype=tf.float32, name=name)
  for s in profile.columns:
    if s.column.kind == CATEGORICAL:
      name = s.column.input_name
      inputs[name] = tf.keras.Input(shape=(1,), dtype=tf.string, name=name)
  if members == 1:
    outputs = _network(profile, hp, inputs, numeric, body, "")
  else:
    linear = []
    if linear_share is not None:
      # Built first, so that the networks start from the same random state with it or without.
      if seed is not None:
        tf.keras.utils.set_random_seed(seed + members)
      linear_hp = linear_hparams(hp)
      suffix = member_suffix(members)
      linear.append(_network(profile, linear_hp, inputs, numeric, None, suffix))
    per_member = []
    for i in range(members):
      if seed is not None:
        tf.keras.utils.set_random_seed(seed + i)
      member = member_hparams(hp, i)
      per_member.append(_network(profile, member, inputs, numeric, body, member_suffix(i)))
    if linear:
      shares = member_shares(members, linear_share)
      outputs = layers.WeightedMean(shares, dtype="float32", name=ENSEMBLE_LAYER)(
        per_member + linear
      )
    else:
      outputs = tf.keras.layers.Average(dtype="float32", name=ENSEMBLE_LAYER)(per_member)
  return tf.keras.Model(inputs=inputs, outputs=outputs, name="tabular_model")


def _network(profile: Profile, hp: dict[str, Any], inputs: dict[str, Any], numeric, body, suffix):
  """One network on the model's inputs (`numeric`: the profile's number columns, in input
  order): preprocessing, body and the task's output."""
  import tensorflow as tf

  parts = []
  if numeric:
    values = inputs[model_contract.NUMERIC_INPUT]
    parts.append(
      layers.NumericPreprocessing(
        [s.mean for s in numeric],
        [s.std for s in numeric],
        [s.may_be_missing for s in numeric],
        name=f"numeric_preprocessing{suffix}",
      )(values)
    )
    if int(hp["numeric_bins"]) and any(s.edges for s in numeric):
      parts.append(
        layers.NumericBins(
          [s.edges for s in numeric], [s.mean for s in numeric], name=f"bins{suffix}"
        )(values)
      )
    at = {s.column.name: i for i, s in enumerate(numeric)}
    for i, date in enumerate(profile.date_parts):
      where = [at[date.year], at[date.month], at[date.day] if date.day else -1]
      stats = date.stats
      parts.append(
        layers.DatePartsFeatures(
          where, stats.day_mean, stats.day_scale, stats.edges, name=f"date_parts_{i}{suffix}"
        )(values)
      )
  for s in profile.columns:
    if s.column.kind == CATEGORICAL:
      parts.append(_text_part(s, inputs[s.column.input_name], hp, suffix))
  if len(parts) == 1:
    x = parts[0]
  else:
    x = tf.keras.layers.Concatenate(name=f"{model_contract.PREPROCESSED_LAYER}{suffix}")(parts)
  full = model_hparams(profile, hp, x.shape[-1])
  if body is None:
    head = default_body(x, full, suffix)
  else:
    head = body(x, full, suffix) if suffix else body(x, full)
  return _task_output(head, profile, suffix)


def names_members(body: Body | None) -> bool:
  """Whether copies of a network can sit in one model: the default network, or a body that
  takes the `suffix` its layer names get (the bundled module's `_body` does)."""
  return body is None or "suffix" in inspect.signature(body).parameters


def ensemble_members(model) -> list:
  """The members of a `build_model` ensemble as models of their own, sharing its layers (so
  fitting one trains the ensemble's weights); [model] for a single network."""
  import tensorflow as tf

  names = {layer.name for layer in model.layers}
  if ENSEMBLE_LAYER not in names:
    return [model]
  return [
    tf.keras.Model(inputs=model.inputs, outputs=output, name=f"tabular_model{member_suffix(i)}")
    for i, output in enumerate(model.get_layer(ENSEMBLE_LAYER).input)
  ]


def compile_model(model, profile: Profile, learning_rate: float, steps_per_execution: int) -> None:
  """Compiles with Adam and the task's loss and metric (named 'accuracy' or 'rmse').

  A regression's loss is the mean squared error in units of the label's standard deviation,
  which is what training on the standardized label minimizes.
  """
  import tensorflow as tf

  task = profile.label.task
  if profile.readings:
    loss, metric = readings.loss_and_metric(profile)
  elif task == tasks.MULTICLASS:
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
  import tensorflow as tf

  # One traced graph for every batch: called eagerly, the layers ran op by op, 27 s for the
  # 2 million eval rows of a 10-million-row table.
  predict = tf.function(lambda features: model(features, training=False), reduce_retracing=True)
  correct = total = 0
  sq = ab = 0.0
  for features, target in dataset:
    pred = predict(features).numpy()
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
      model_contract.ROWS_SIGNATURE: model_contract.rows_signature(model, columns),
      model_contract.TRANSFORM_SIGNATURE: transform_features.get_concrete_function(),
    },
  )
  model_contract.write_contract(export_dir, contract_of(profile))


def _contract_kind(s: ColumnStats) -> str:
  if s.number:
    return TEXT_NUMBER
  return "date" if s.date is not None else FREE_TEXT if s.free_text else s.column.kind


def contract_of(profile: Profile) -> model_contract.ModelContract:
  """The model contract of a model built from `profile`."""

  def column(s: ColumnStats) -> dict[str, Any]:
    entry = {
      "column": s.column.name,
      "kind": _contract_kind(s),
      "stored_as": s.column.dtype,
      "may_be_missing": s.may_be_missing,
      "rows_input": model_contract.rows_key(s.column.name),
    }
    if s.column.kind == CATEGORICAL and s.date is None and not s.number:
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
