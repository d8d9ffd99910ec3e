"""A tabular model for any CSV: profile the data, build preprocessing + network, train, export.

This is the code behind the default trainer module. It reads the schema for the columns, makes
one pass over the training split for the statistics (means, standard deviations, missing
counts, vocabularies, label values), builds a Keras model whose first layers hold that
preprocessing, trains it under the DistributedTrainer's strategy (or the default strategy in
the stock TFX Trainer) and exports a SavedModel that serves raw tf.Examples, with a
`transform_features` signature (the label as the model sees it, for TFMA) and a contract file.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from components import defaults, model_contract, tasks
from components.distributed_trainer import distributed_trainer_lib as train_lib
from components.distributed_trainer import steps_lib, strategy_lib
from components.model_contract import CATEGORICAL, NUMERIC, Column

_LOG = logging.getLogger(__name__)

DEFAULT_HPARAMS: dict[str, Any] = {
  "hidden_units": 256,
  "num_layers": 1,
  "learning_rate": 1e-3,
  "dropout": 0.0,
  # Text values seen fewer times than this in training go to the out-of-vocabulary slot.
  "min_category_count": 2,
  "max_vocabulary": 200,
  "max_classes": tasks.DEFAULT_MAX_CLASSES,
}
_PROFILE_BATCH = 4096

Body = Callable[[Any, dict[str, Any]], Any]


class TabularInputError(tasks.LabelError):
  """The data, options or module do not fit the tabular model; the message names the fix."""


# ----------------------------------------------------------------------------- profile


@dataclasses.dataclass(frozen=True)
class ColumnStats:
  """Training statistics of one column.

  Attributes:
    column: the column.
    count: rows with a value.
    missing: rows without one.
    mean: mean of the values (numeric columns).
    std: standard deviation of the values (numeric columns).
    vocabulary: most frequent values, most frequent first (categorical columns).
  """

  column: Column
  count: int
  missing: int
  mean: float = 0.0
  std: float = 1.0
  vocabulary: tuple[str, ...] = ()

  @property
  def may_be_missing(self) -> bool:
    return self.missing > 0


@dataclasses.dataclass(frozen=True)
class Profile:
  """What the model's preprocessing and head are built from.

  Attributes:
    columns: per-column statistics, in input order.
    label: the label's task and classes.
    label_dtype: how the label is stored ('int64', 'float32' or 'string').
    rows: training rows seen.
    label_mean: mean of a regression label.
    label_std: standard deviation of a regression label.
  """

  columns: tuple[ColumnStats, ...]
  label: tasks.LabelInfo
  label_dtype: str
  rows: int
  label_mean: float = 0.0
  label_std: float = 1.0


class _Moments:
  def __init__(self):
    self.count = 0
    self.total = 0.0
    self.total_sq = 0.0

  def add(self, values: np.ndarray) -> None:
    values = values.astype(np.float64)
    self.count += values.size
    self.total += float(values.sum())
    self.total_sq += float(np.square(values).sum())

  def mean_std(self) -> tuple[float, float]:
    if not self.count:
      return 0.0, 1.0
    mean = self.total / self.count
    var = max(self.total_sq / self.count - mean * mean, 0.0)
    return mean, math.sqrt(var)


def _label_value(value, dtype: str):
  if dtype == model_contract.STRING:
    return value.decode("utf-8", "replace")
  if dtype == model_contract.INT64:
    return int(value)
  return float(value)


def profile_data(
  files: Sequence[str],
  columns: Sequence[Column],
  label_key: str,
  label_dtype: str,
  task: str = tasks.AUTO,
  hparams: dict[str, Any] | None = None,
) -> Profile:
  """One pass over training files: column statistics, label values and the task.

  Args:
    files: gzipped TFRecord files of tf.Examples.
    columns: the model's columns.
    label_key: the label column.
    label_dtype: how the label is stored.
    task: tasks.AUTO or a task name (the pipeline's `--task`).
    hparams: max_vocabulary, min_category_count and max_classes are read from it.

  Returns:
    The Profile.

  Raises:
    TabularInputError: for an empty training split.
    tasks.LabelError: for a label that cannot be learned as asked.
  """
  import tensorflow as tf

  hp = {**DEFAULT_HPARAMS, **(hparams or {})}
  max_classes = int(hp["max_classes"])
  numeric = {c.name: _Moments() for c in columns if c.kind == NUMERIC}
  missing = {c.name: 0 for c in columns}
  counts: dict[str, Counter] = {c.name: Counter() for c in columns if c.kind == CATEGORICAL}
  label_values: set = set()
  label_overflow = False
  label_moments = _Moments()
  rows = 0

  def parse(serialized):
    return (
      model_contract.parse_columns(serialized, columns),
      model_contract.parse_label(serialized, label_key, label_dtype),
    )

  ds = tf.data.TFRecordDataset(list(files), compression_type="GZIP").batch(_PROFILE_BATCH)
  position = {c.name: i for i, c in enumerate(model_contract.numeric_columns(columns))}
  for features, batch_label in ds.map(parse).as_numpy_iterator():
    label = batch_label
    rows += len(label)
    for c in columns:
      if c.kind == NUMERIC:
        values = features[c.input_name][:, position[c.name]]
      else:
        values = features[c.input_name][:, 0]
      if c.kind == NUMERIC:
        present = ~np.isnan(values)
        missing[c.name] += int((~present).sum())
        numeric[c.name].add(values[present])
      else:
        present = values != b""
        missing[c.name] += int((~present).sum())
        uniques, freq = np.unique(values[present], return_counts=True)
        counts[c.name].update(dict(zip(uniques.tolist(), freq.tolist(), strict=True)))
    if label_dtype == model_contract.STRING:
      label = label[label != b""]
    else:
      if label_dtype == model_contract.FLOAT32:
        label = label[~np.isnan(label)]
      label_moments.add(label)
    if not label_overflow:
      label_values.update(np.unique(label).tolist())
      label_overflow = len(label_values) > max_classes
      if label_overflow:
        label_values = set(sorted(label_values)[: max_classes + 1])
  if rows == 0:
    raise TabularInputError(
      "the training split has no rows; give the ExampleGen more data or another split ratio."
    )
  kind = {
    model_contract.INT64: tasks.INT,
    model_contract.FLOAT32: tasks.FLOAT,
    model_contract.STRING: tasks.STRING,
  }[label_dtype]
  distinct = sorted(_label_value(v, label_dtype) for v in label_values)
  count = len(distinct) + (1 if label_overflow else 0)
  decided = tasks.infer_task(label_key, kind, distinct, count, task, max_classes)
  label = tasks.label_info(label_key, decided, distinct)
  stats = []
  for c in columns:
    if c.kind == NUMERIC:
      mean, std = numeric[c.name].mean_std()
      stats.append(ColumnStats(c, rows - missing[c.name], missing[c.name], mean, std or 1.0))
    else:
      vocab = _vocabulary(counts[c.name], int(hp["max_vocabulary"]), int(hp["min_category_count"]))
      stats.append(ColumnStats(c, rows - missing[c.name], missing[c.name], vocabulary=vocab))
  label_mean, label_std = label_moments.mean_std()
  return Profile(tuple(stats), label, label_dtype, rows, label_mean, label_std or 1.0)


def _vocabulary(counts: Counter, max_size: int, min_count: int) -> tuple[str, ...]:
  # Most frequent first; ties broken by value so that reruns build identical models.
  ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
  return tuple(v.decode("utf-8", "replace") for v, n in ranked[:max_size] if n >= min_count)


# ----------------------------------------------------------------------------- model


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
  """The default network on the preprocessed vector: a ReLU MLP and the task's head.

  Args:
    x: the preprocessed float32 [batch, num_features] KerasTensor.
    hparams: hidden_units, num_layers, dropout, task, num_outputs, label_mean, label_std.

  Returns:
    The output KerasTensor: softmax probabilities, a sigmoid probability or a value.
  """
  import tensorflow as tf

  for i in range(int(hparams["num_layers"])):
    x = tf.keras.layers.Dense(int(hparams["hidden_units"]), activation="relu", name=f"hidden_{i}")(
      x
    )
    if float(hparams["dropout"]) > 0:
      x = tf.keras.layers.Dropout(float(hparams["dropout"]), name=f"dropout_{i}")(x)
  task = hparams["task"]
  x = tf.keras.layers.Dense(int(hparams["num_outputs"]), name="head")(x)
  # The head runs in float32 so probabilities stay exact under mixed precision policies.
  if task == tasks.MULTICLASS:
    return tf.keras.layers.Activation("softmax", dtype="float32", name="probabilities")(x)
  if task == tasks.BINARY:
    return tf.keras.layers.Activation("sigmoid", dtype="float32", name="probability")(x)
  return tf.keras.layers.Rescaling(
    scale=float(hparams["label_std"]),
    offset=float(hparams["label_mean"]),
    dtype="float32",
    name="value",
  )(x)


def build_model(profile: Profile, hparams: dict[str, Any], body: Body | None = None):
  """Builds the whole model: raw inputs -> preprocessing layers -> body.

  Args:
    profile: statistics and label of the training data.
    hparams: user hyper-parameters (see DEFAULT_HPARAMS).
    body: builds the outputs from the preprocessed vector and the model hparams; None for
      `default_body`.

  Returns:
    An uncompiled functional tf.keras.Model taking a dict of [batch, 1] inputs.
  """
  import tensorflow as tf

  from components import preprocessing_layers as layers

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
  for s in profile.columns:
    if s.column.kind == CATEGORICAL:
      name = s.column.input_name
      inputs[name] = tf.keras.Input(shape=(1,), dtype=tf.string, name=name)
      parts.append(
        layers.CategoryOneHot(s.vocabulary, s.may_be_missing, name=f"one_hot_{name}")(inputs[name])
      )
  x = parts[0] if len(parts) == 1 else tf.keras.layers.Concatenate(name="preprocessed")(parts)
  hp = model_hparams(profile, hparams, x.shape[-1])
  hp.update(label_mean=profile.label_mean, label_std=profile.label_std)
  outputs = (body or default_body)(x, hp)
  return tf.keras.Model(inputs=inputs, outputs=outputs, name="tabular_model")


def build_model_adapter(build_model_fn: Callable[[dict[str, Any]], Any]) -> Body:
  """Turns a `build_model(hparams)` module function into a model body.

  The module's model takes the preprocessed float32 [batch, hparams['num_features']] vector
  and returns [batch, hparams['num_outputs']]: class probabilities (multiclass), the
  probability of classes[1] (binary) or the value (regression).
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


def compile_model(model, task: str, learning_rate: float, steps_per_execution: int) -> None:
  """Compiles with Adam and the task's loss and metric (named 'accuracy' or 'rmse')."""
  import tensorflow as tf

  if task == tasks.MULTICLASS:
    loss = tf.keras.losses.SparseCategoricalCrossentropy()
    metric = tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")
  elif task == tasks.BINARY:
    loss = tf.keras.losses.BinaryCrossentropy()
    metric = tf.keras.metrics.BinaryAccuracy(name="accuracy")
  else:
    loss = tf.keras.losses.MeanSquaredError()
    metric = tf.keras.metrics.RootMeanSquaredError(name="rmse")
  model.compile(
    optimizer=tf.keras.optimizers.Adam(learning_rate),
    loss=loss,
    metrics=[metric],
    steps_per_execution=steps_per_execution,
  )


# ----------------------------------------------------------------------------- input


def label_target(label, info: tasks.LabelInfo, dtype: str):
  """Maps raw labels to what the model is trained against.

  Class labels become class indices (int64 for multiclass, float32 0/1 for binary), -1 for a
  value outside the class vocabulary; regression labels become float32.
  """
  import tensorflow as tf

  if info.task == tasks.REGRESSION:
    return tf.cast(label, tf.float32)
  classes = tf.constant(
    list(info.classes),
    dtype={"int64": tf.int64, "float32": tf.float32, "string": tf.string}[dtype],
  )
  hit = tf.equal(tf.expand_dims(label, 1), tf.expand_dims(classes, 0))
  index = tf.where(
    tf.reduce_any(hit, axis=1), tf.argmax(tf.cast(hit, tf.int32), axis=1), tf.constant(-1, tf.int64)
  )
  if info.task == tasks.BINARY:
    return tf.cast(index, tf.float32)
  return index


def make_dataset(
  files: Sequence[str],
  profile: Profile,
  batch_size: int,
  *,
  training: bool,
  seed: int = train_lib.DEFAULT_SHUFFLE_SEED,
  num_shards: int = 1,
  shard_index: int = 0,
):
  """(features, target) batches from gzipped tf.Example files; see train_lib.record_dataset."""
  import tensorflow as tf

  columns = [s.column for s in profile.columns]
  ds = train_lib.record_dataset(
    files,
    batch_size,
    training=training,
    seed=seed,
    num_shards=num_shards,
    shard_index=shard_index,
  )

  def parse(serialized):
    target = label_target(
      model_contract.parse_label(serialized, profile.label.key, profile.label_dtype),
      profile.label,
      profile.label_dtype,
    )
    if profile.label.task != tasks.MULTICLASS:
      target = tf.expand_dims(target, 1)
    return model_contract.parse_columns(serialized, columns), target

  return ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


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
  """Saves the serving SavedModel: raw tf.Examples in, the task's outputs out.

  Signatures:
    serving_default: `examples` (serialized tf.Examples) -> {"outputs": ...}.
    transform_features: `examples` -> {label key: the label as the model is trained against
      it}; TFMA evaluates with it (`preprocessing_function_names`).

  The contract (model_contract.ModelContract) is written to assets.extra/contract.json.
  """
  import tensorflow as tf

  columns = [s.column for s in profile.columns]
  spec = [tf.TensorSpec([None], tf.string, name=model_contract.SERVING_INPUT)]

  @tf.function(input_signature=spec)
  def serve(examples):
    features = model_contract.parse_columns(examples, columns)
    return {model_contract.SERVING_OUTPUT: model(features, training=False)}

  @tf.function(input_signature=spec)
  def transform_features(examples):
    label = model_contract.parse_label(examples, profile.label.key, profile.label_dtype)
    return {profile.label.key: label_target(label, profile.label, profile.label_dtype)}

  model.save(
    export_dir,
    save_format="tf",
    include_optimizer=False,
    signatures={
      "serving_default": serve.get_concrete_function(),
      model_contract.TRANSFORM_SIGNATURE: transform_features.get_concrete_function(),
    },
  )
  model_contract.write_contract(export_dir, contract_of(profile))


def contract_of(profile: Profile) -> model_contract.ModelContract:
  """The model contract of a model built from `profile`."""

  def column(s: ColumnStats) -> dict[str, Any]:
    entry = {
      "column": s.column.name,
      "kind": s.column.kind,
      "stored_as": s.column.dtype,
      "may_be_missing": s.may_be_missing,
    }
    if s.column.kind == CATEGORICAL:
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


def publish(export: Callable[[str], None], serving_model_dir: str) -> None:
  """Writes an export into a staging folder beside `serving_model_dir`, then renames it."""
  import tensorflow as tf

  staging = f"{serving_model_dir.rstrip('/')}.staging-{uuid.uuid4().hex}"
  try:
    export(staging)
    if tf.io.gfile.exists(serving_model_dir):
      tf.io.gfile.rmtree(serving_model_dir)
    tf.io.gfile.rename(staging, serving_model_dir)
  finally:
    if tf.io.gfile.exists(staging):
      tf.io.gfile.rmtree(staging)


# ----------------------------------------------------------------------------- training


def warm_start(model, base_model_dir: str) -> list[str]:
  """Copies the weights of same-named, same-shaped layers from a base SavedModel.

  Layers whose shapes changed (a new vocabulary, a new class) keep their fresh weights.

  Returns:
    Names of the layers that were copied.
  """
  import tensorflow as tf

  from components import preprocessing_layers  # noqa: F401  (registers the layers)

  base = tf.keras.models.load_model(base_model_dir, compile=False)
  base_layers = {layer.name: layer for layer in base.layers}
  copied = []
  for layer in model.layers:
    source = base_layers.get(layer.name)
    if source is None or not layer.weights:
      continue
    weights = source.get_weights()
    if [w.shape for w in weights] == [tuple(w.shape) for w in layer.weights]:
      layer.set_weights(weights)
      copied.append(layer.name)
  _LOG.info("Warm start from %s: copied %s", base_model_dir, copied)
  return copied


@dataclasses.dataclass
class RunSettings:
  """What a run needs besides the data, read from FnArgs and custom_config.

  Attributes:
    train_files: training file patterns.
    eval_files: evaluation file patterns.
    schema_path: schema.pbtxt.
    serving_model_dir: where the SavedModel goes.
    model_run_dir: TensorBoard logs, backups, progress and results.
    label_key: the label column.
    task: tasks.AUTO or a task.
    exclude_columns: columns not to learn from.
    hparams: hyper-parameters (DEFAULT_HPARAMS overridden by config, then by the Tuner).
    train_steps: optimizer steps.
    eval_steps: eval batches (0 or None: the whole split).
    global_batch_size: examples per step over all replicas.
    num_epochs: epochs the steps are split into (a backup is saved after each).
    steps_per_execution: steps per compiled call.
    mixed_precision: '', 'mixed_float16' or 'mixed_bfloat16'.
    base_model: SavedModel to warm-start from, or None.
    seed: shuffle and initialisation seed.
    profile_steps: (start, end) steps to profile with TensorBoard, or None.
    backup_dir: BackupAndRestore's folder; None: inside model_run_dir.
  """

  train_files: list[str]
  eval_files: list[str]
  schema_path: str
  serving_model_dir: str
  model_run_dir: str
  label_key: str
  task: str = tasks.AUTO
  exclude_columns: tuple[str, ...] = ()
  hparams: dict[str, Any] = dataclasses.field(default_factory=dict)
  train_steps: int = defaults.TRAIN_STEPS
  eval_steps: int | None = None
  global_batch_size: int = defaults.GLOBAL_BATCH_SIZE
  num_epochs: int = defaults.NUM_EPOCHS
  steps_per_execution: int = defaults.STEPS_PER_EXECUTION
  mixed_precision: str = ""
  base_model: str | None = None
  seed: int = train_lib.DEFAULT_SHUFFLE_SEED
  profile_steps: tuple[int, int] | None = None
  backup_dir: str | None = None


def settings_from_fn_args(fn_args) -> RunSettings:
  """Reads RunSettings from stock FnArgs (or the DistributedTrainer's, which add more).

  custom_config keys: label_key, task, exclude_columns, hparams, profile_steps. Tuner output
  (`fn_args.hyperparameters`, a keras_tuner config) overrides hparams.
  """
  custom = dict(getattr(fn_args, "custom_config", None) or {})
  hparams = dict(custom.get("hparams") or {})
  tuned = getattr(fn_args, "hyperparameters", None)
  if tuned:
    hparams.update(tuned.get("values", tuned))
  if not getattr(fn_args, "schema_path", None):
    raise TabularInputError(
      "the default trainer module needs the schema; wire schema=schema_gen.outputs['schema']."
    )
  profile_steps = custom.get("profile_steps")
  return RunSettings(
    train_files=list(fn_args.train_files),
    eval_files=list(fn_args.eval_files),
    schema_path=fn_args.schema_path,
    serving_model_dir=fn_args.serving_model_dir,
    model_run_dir=fn_args.model_run_dir,
    label_key=custom.get("label_key", defaults.LABEL_KEY),
    task=custom.get("task") or tasks.AUTO,
    exclude_columns=tuple(custom.get("exclude_columns") or ()),
    hparams=hparams,
    train_steps=int(fn_args.train_steps or defaults.TRAIN_STEPS),
    eval_steps=fn_args.eval_steps or None,
    global_batch_size=int(getattr(fn_args, "global_batch_size", defaults.GLOBAL_BATCH_SIZE)),
    num_epochs=int(getattr(fn_args, "num_epochs", defaults.NUM_EPOCHS)),
    steps_per_execution=int(getattr(fn_args, "steps_per_execution", defaults.STEPS_PER_EXECUTION)),
    mixed_precision=getattr(fn_args, "mixed_precision", "") or "",
    base_model=getattr(fn_args, "base_model", None),
    seed=int(custom.get("seed", train_lib.DEFAULT_SHUFFLE_SEED)),
    profile_steps=tuple(profile_steps) if profile_steps else None,
    backup_dir=getattr(fn_args, "backup_dir", None),
  )


def prepare(settings: RunSettings) -> tuple[Profile, list[str], list[str]]:
  """Reads the schema and profiles the training split.

  Returns:
    (profile, training files, eval files).
  """
  schema = model_contract.read_schema(settings.schema_path)
  columns = model_contract.columns_from_schema(schema, settings.label_key, settings.exclude_columns)
  dtype = model_contract.label_dtype(schema, settings.label_key)
  train_files = train_lib.list_files(settings.train_files)
  eval_files = train_lib.list_files(settings.eval_files)
  profile = profile_data(
    train_files, columns, settings.label_key, dtype, settings.task, settings.hparams
  )
  _LOG.info(
    "Tabular model: task=%s, %d columns, %d training rows, classes=%s",
    profile.label.task,
    len(columns),
    profile.rows,
    list(profile.label.classes)[:20],
  )
  return profile, train_files, eval_files


def run(
  fn_args, body: Body | None = None, module_style: str = defaults.MODULE_STYLE_TABULAR
) -> train_lib.TrainResult:
  """Trains and exports the tabular model for a run_fn call.

  Under the DistributedTrainer, `fn_args` carries the strategy built for this process (and
  whether it is the chief); under the stock Trainer the default strategy is used.

  Args:
    fn_args: stock FnArgs or the DistributedTrainer's DistributedFnArgs.
    body: the network on the preprocessed vector; None for `default_body`.
    module_style: recorded on the result ('tabular' or 'build_model').

  Returns:
    This process's TrainResult (also written under model_run_dir).
  """
  settings = settings_from_fn_args(fn_args)
  built = getattr(fn_args, "built_strategy", None) or strategy_lib.default_strategy()
  attempt = int(getattr(fn_args, "attempt", 0) or 0)
  return train(settings, built, body, attempt, module_style)


def train(
  settings: RunSettings,
  built: strategy_lib.BuiltStrategy,
  body: Body | None = None,
  attempt: int = 0,
  module_style: str = defaults.MODULE_STYLE_TABULAR,
) -> train_lib.TrainResult:
  """Profiles, builds, fits under `built`, and on the chief evaluates and exports.

  Args:
    settings: what to train on and how.
    built: the strategy of this process.
    body: the network on the preprocessed vector; None for `default_body`.
    attempt: restart count of a surrounding local cluster.
    module_style: recorded on the result.

  Returns:
    This process's TrainResult.
  """
  import tensorflow as tf

  from components import tf_compat

  tf_compat.apply()
  if settings.mixed_precision not in train_lib.MIXED_PRECISION_POLICIES:
    raise TabularInputError(
      f"mixed_precision={settings.mixed_precision!r}; use one of "
      f"{train_lib.MIXED_PRECISION_POLICIES}."
    )
  profile, train_files, eval_files = prepare(settings)
  hparams = {**DEFAULT_HPARAMS, **settings.hparams}
  epochs = max(1, min(settings.num_epochs, settings.train_steps))
  steps_per_epoch = math.ceil(settings.train_steps / epochs)
  steps_lib.check_profile_steps(settings.profile_steps, epochs * steps_per_epoch)
  previous_policy = tf.keras.mixed_precision.global_policy()
  if settings.mixed_precision:
    tf.keras.mixed_precision.set_global_policy(settings.mixed_precision)
  try:
    # Same initial weights in every process and run, so runs differ only by the strategy.
    tf.keras.utils.set_random_seed(settings.seed)
    with built.strategy.scope():
      model = build_model(profile, hparams, body)
      warm = warm_start(model, settings.base_model) if settings.base_model else []
      if not getattr(model, "_is_compiled", False) or model.optimizer is None:
        compile_model(
          model,
          profile.label.task,
          float(hparams["learning_rate"]),
          settings.steps_per_execution,
        )

    def dataset_fn(input_context):
      return make_dataset(
        train_files,
        profile,
        input_context.get_per_replica_batch_size(settings.global_batch_size),
        training=True,
        seed=settings.seed,
        num_shards=input_context.num_input_pipelines,
        shard_index=input_context.input_pipeline_id,
      )

    fit = train_lib.fit(
      model,
      built,
      dataset_fn,
      train_lib.FitConfig(
        model_run_dir=settings.model_run_dir,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        global_batch_size=settings.global_batch_size,
        attempt=attempt,
        profile_steps=settings.profile_steps,
        steps_per_execution=settings.steps_per_execution,
        backup_dir=settings.backup_dir,
      ),
    )
    result = train_lib.TrainResult(
      strategy=built.choice.name,
      strategy_reason=built.choice.reason,
      num_replicas_in_sync=built.num_replicas_in_sync,
      task_type=built.task_type,
      task_index=built.task_index,
      is_chief=built.is_chief,
      module_style=module_style,
      task=profile.label.task,
      hparams={k: v for k, v in hparams.items() if isinstance(v, int | float | str | bool)},
      warm_started_layers=warm,
      **fit,
    )
    if built.is_chief:
      # A fresh model outside the strategy scope: evaluation and export need no collectives
      # with the other workers and carry no distribution state.
      plain = build_model(profile, hparams, body)
      plain.set_weights(model.get_weights())
      eval_ds = make_dataset(eval_files, profile, settings.global_batch_size, training=False)
      if settings.eval_steps:
        eval_ds = eval_ds.take(settings.eval_steps)
      metrics = evaluate(plain, eval_ds, profile.label.task)
      result.eval_metrics = metrics
      result.eval_accuracy = metrics.get("accuracy")
      _LOG.info("Tabular model eval: %s", metrics)
      publish(lambda d: export_saved_model(plain, profile, d), settings.serving_model_dir)
  finally:
    tf.keras.mixed_precision.set_global_policy(previous_policy)
  train_lib.write_result(settings.model_run_dir, result)
  return result


# ----------------------------------------------------------------------------- tuning


def tuner_fn(fn_args, body: Body | None = None, max_trials: int | None = None):
  """A keras_tuner RandomSearch over width, depth and learning rate (stock Tuner contract).

  Args:
    fn_args: the stock Tuner's FnArgs (custom_config as for `run`, plus `tune_trials`).
    body: unused by the search space but kept for build_model modules.
    max_trials: trials to run; default custom_config['tune_trials'] or 10.

  Returns:
    tfx.components.TunerFnResult.
  """
  import keras_tuner
  import tensorflow as tf
  from tfx import v1 as tfx

  settings = settings_from_fn_args(fn_args)
  custom = dict(getattr(fn_args, "custom_config", None) or {})
  profile, train_files, eval_files = prepare(settings)
  base = {**DEFAULT_HPARAMS, **settings.hparams}
  space = keras_tuner.HyperParameters()
  space.Choice("hidden_units", [32, 64, 128, 256], default=int(base["hidden_units"]))
  space.Int("num_layers", 1, 3, default=int(base["num_layers"]))
  space.Choice("learning_rate", [1e-3, 3e-3, 1e-2], default=float(base["learning_rate"]))

  def build(hp):
    model = build_model(profile, {**base, **hp.values}, body)
    compile_model(model, profile.label.task, float(hp.get("learning_rate")), 1)
    return model

  objective = keras_tuner.Objective(
    "val_rmse" if profile.label.task == tasks.REGRESSION else "val_accuracy",
    "min" if profile.label.task == tasks.REGRESSION else "max",
  )
  tuner = keras_tuner.RandomSearch(
    build,
    objective=objective,
    max_trials=int(max_trials or custom.get("tune_trials") or 10),
    hyperparameters=space,
    directory=fn_args.working_dir,
    project_name="tabular",
    seed=settings.seed,
  )
  train = make_dataset(train_files, profile, settings.global_batch_size, training=True)
  evals = make_dataset(eval_files, profile, settings.global_batch_size, training=False)
  steps = max(1, settings.train_steps)
  return tfx.components.TunerFnResult(
    tuner=tuner,
    fit_kwargs={
      "x": train,
      "validation_data": evals,
      "steps_per_epoch": steps,
      "epochs": 1,
      "verbose": 0,
      "callbacks": [tf.keras.callbacks.TerminateOnNaN()],
    },
  )
