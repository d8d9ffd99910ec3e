"""Plain-Python training for `build_model(hparams)` modules: input, fit per strategy, export."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from components.distributed_trainer import strategy_lib

_LOG = logging.getLogger(__name__)

SERVING_DIR = "Format-Serving"
KERAS_DIR = "Format-Keras"
KERAS_MODEL_FILE = "model.h5"
INPUT_SPEC_FILE = "input_spec.json"
SERVING_INPUT_NAME = "examples"
SERVING_OUTPUT_NAME = "outputs"

DEFAULT_LABEL_KEY = "label"
DEFAULT_GLOBAL_BATCH_SIZE = 64
# 300 steps x 64 examples is about 13 passes over the 1.4k digits training rows: > 0.95 eval
# accuracy with the default module in a few seconds on 2 CPU cores.
DEFAULT_TRAIN_STEPS = 300
DEFAULT_NUM_EPOCHS = 5
DEFAULT_STEPS_PER_EXECUTION = 10
DEFAULT_LEARNING_RATE = 1e-3
DEFAULT_SHUFFLE_SEED = 42
MIXED_PRECISION_POLICIES = ("", "mixed_float16", "mixed_bfloat16")

# Sub-folders of model_run_dir that the trainer owns.
RUN_STATE_DIR = "distributed_trainer"
_BACKUP_DIR = "backup"
_PROGRESS_DIR = "progress"
_RESULTS_DIR = "results"
_TENSORBOARD_DIR = "logs"
_SHUFFLE_BUFFER = 10_000


_AUTOGRAPH_PATCHED = False


def skip_autograph_for_tf_keras() -> None:
  """Makes AutoGraph leave tf_keras internals unconverted, as it does for `keras`.

  TF 2.16's AutoGraph rules exempt the `keras` package but not `tf_keras`, so the first
  `fit` of every process re-transpiles Keras' own training code: 25 s instead of 3.5 s for
  a 2-layer model on this project's 2-core machines. Functions passed to tf.function and
  the `call` of every layer (user layers included) are still converted, exactly as with
  Keras 2 under its old package name. Idempotent.
  """
  global _AUTOGRAPH_PATCHED
  if _AUTOGRAPH_PATCHED:
    return
  from tensorflow.python.autograph.core import config as autograph_config

  autograph_config.CONVERSION_RULES = (
    autograph_config.DoNotConvert("tf_keras"),
    *autograph_config.CONVERSION_RULES,
  )
  _AUTOGRAPH_PATCHED = True


class TrainerInputError(ValueError):
  """Bad data, schema or module for the build_model path; the message names the fix."""


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
  """Dense numeric input layout derived from the schema.

  Attributes:
    feature_keys: all scalar numeric features except the label, sorted; the Keras input
      column order.
    feature_dtypes: feature name -> 'int64' or 'float32' as stored in the tf.Examples.
    label_key: name of the int label feature.
  """

  feature_keys: tuple[str, ...]
  feature_dtypes: dict[str, str]
  label_key: str

  def parse_spec(self, with_label: bool) -> dict[str, Any]:
    """Returns the tf.io.parse_example spec (label included when asked)."""
    import tensorflow as tf

    spec = {
      key: tf.io.FixedLenFeature([], tf.as_dtype(self.feature_dtypes[key]))
      for key in self.feature_keys
    }
    if with_label:
      spec[self.label_key] = tf.io.FixedLenFeature([], tf.int64)
    return spec

  def to_dense(self, parsed: dict[str, Any]):
    """Stacks parsed features into the float32 [batch, num_features] model input."""
    import tensorflow as tf

    return tf.stack([tf.cast(parsed[k], tf.float32) for k in self.feature_keys], axis=1)


def read_feature_spec(schema_path: str, label_key: str = DEFAULT_LABEL_KEY) -> FeatureSpec:
  """Reads a schema.pbtxt into the dense input layout.

  Args:
    schema_path: path of a text-format tensorflow_metadata Schema.
    label_key: the label feature; it must be an INT feature of the schema.

  Returns:
    The FeatureSpec with all other features sorted by name.

  Raises:
    TrainerInputError: when the label is missing or a feature is not a numeric scalar.
  """
  import tensorflow as tf
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2

  schema = text_format.Parse(tf.io.gfile.GFile(schema_path).read(), schema_pb2.Schema())
  kinds = {schema_pb2.INT: "int64", schema_pb2.FLOAT: "float32"}
  dtypes: dict[str, str] = {}
  for feature in schema.feature:
    if feature.type not in kinds:
      raise TrainerInputError(
        f"feature {feature.name!r} is {schema_pb2.FeatureType.Name(feature.type)}; the "
        "build_model path takes numeric scalar features only, so drop it in the ExampleGen or "
        "use a run_fn module"
      )
    dims = [d.size for d in feature.shape.dim] if feature.HasField("shape") else []
    if dims not in ([], [1]):
      raise TrainerInputError(
        f"feature {feature.name!r} has shape {dims}; the build_model path takes scalar "
        "features only, so use a run_fn module for it"
      )
    dtypes[feature.name] = kinds[feature.type]
  if label_key not in dtypes:
    raise TrainerInputError(
      f"label {label_key!r} is not in the schema (features: {sorted(dtypes)[:5]}...); set "
      "custom_config={'label_key': ...}"
    )
  if dtypes[label_key] != "int64":
    raise TrainerInputError(
      f"label {label_key!r} is FLOAT; the build_model path trains classifiers on int class "
      "ids, so cast the label to int in the ExampleGen or use a run_fn module"
    )
  keys = tuple(sorted(k for k in dtypes if k != label_key))
  return FeatureSpec(keys, {k: dtypes[k] for k in keys}, label_key)


def list_files(file_patterns: Sequence[str]) -> list[str]:
  """Expands glob patterns to a sorted file list.

  Args:
    file_patterns: glob patterns such as `<uri>/Split-train/*`.

  Returns:
    Sorted matching files.

  Raises:
    TrainerInputError: when nothing matches.
  """
  import tensorflow as tf

  files = sorted({f for pattern in file_patterns for f in tf.io.gfile.glob(pattern)})
  if not files:
    raise TrainerInputError(
      f"no input files match {list(file_patterns)}; check the Examples artifact and the splits"
    )
  return files


def make_dataset(
  files: Sequence[str],
  features: FeatureSpec,
  batch_size: int,
  *,
  training: bool,
  seed: int = DEFAULT_SHUFFLE_SEED,
  num_shards: int = 1,
  shard_index: int = 0,
):
  """Builds a (float32 [batch, n], int32 [batch]) dataset from gzipped tf.Example files.

  Training datasets repeat, shuffle and drop the last partial batch. With several input
  pipelines they are sharded by file when there are enough files; otherwise every pipeline
  reads the same seeded shuffle and keeps every num_shards-th record, so the union of the
  per-replica batches of one step equals the global batch a single worker would draw.

  Args:
    files: TFRecord files (GZIP when they end in .gz).
    features: the dense input layout.
    batch_size: batch size of this pipeline (per replica under a strategy).
    training: repeat/shuffle/drop_remainder for training; one ordered pass otherwise.
    seed: shuffle seed, identical on every worker.
    num_shards: number of input pipelines.
    shard_index: index of this pipeline.

  Returns:
    A tf.data.Dataset.
  """
  import tensorflow as tf

  files = list(files)
  shard_records = training and num_shards > 1
  if shard_records and len(files) >= num_shards:
    files = files[shard_index::num_shards]
    shard_records = False
  compression = "GZIP" if files[0].endswith(".gz") else ""
  ds = tf.data.TFRecordDataset(
    files, compression_type=compression, num_parallel_reads=min(len(files), 4)
  )
  if training:
    ds = ds.repeat().shuffle(_SHUFFLE_BUFFER, seed=seed)
    if shard_records:
      ds = ds.shard(num_shards, shard_index)
  ds = ds.batch(batch_size, drop_remainder=training)
  parse_spec = features.parse_spec(with_label=True)

  def parse(serialized):
    parsed = tf.io.parse_example(serialized, parse_spec)
    return features.to_dense(parsed), tf.cast(parsed[features.label_key], tf.int32)

  return ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def make_train_input(
  built: strategy_lib.BuiltStrategy,
  files: Sequence[str],
  features: FeatureSpec,
  global_batch_size: int,
  seed: int = DEFAULT_SHUFFLE_SEED,
):
  """Returns what `model.fit` takes for this strategy, batched per replica.

  ParameterServerStrategy needs a DatasetCreator (each worker builds its own pipeline);
  the other strategies take `distribute_datasets_from_function`.

  Args:
    built: the built strategy.
    files: training TFRecord files.
    features: the dense input layout.
    global_batch_size: examples per step over all replicas.
    seed: shuffle seed.

  Returns:
    A DatasetCreator or a DistributedDataset.

  Raises:
    TrainerInputError: when the global batch does not split evenly over the replicas.
  """
  import tensorflow as tf

  replicas = built.num_replicas_in_sync
  if global_batch_size % replicas:
    raise TrainerInputError(
      f"global_batch_size={global_batch_size} does not divide over {replicas} replicas; pass a "
      f"multiple of {replicas}"
    )

  def dataset_fn(input_context):
    return make_dataset(
      files,
      features,
      input_context.get_per_replica_batch_size(global_batch_size),
      training=True,
      seed=seed,
      num_shards=input_context.num_input_pipelines,
      shard_index=input_context.input_pipeline_id,
    )

  if built.choice.name == strategy_lib.PARAMETER_SERVER:
    return tf.keras.utils.experimental.DatasetCreator(dataset_fn)
  return built.strategy.distribute_datasets_from_function(dataset_fn)


def shard_user_datasets_by_data(strategy) -> None:
  """Makes `strategy` shard auto-sharded input by record instead of by file.

  Under MultiWorkerMirroredStrategy Keras distributes a run_fn's tf.data input with the
  AUTO policy, which shards by file: with fewer files than workers some workers get no
  data and `fit` fails with "Empty logs". Datasets that set their own policy keep it.

  Args:
    strategy: the strategy whose `experimental_distribute_dataset` Keras will call.
  """
  import tensorflow as tf

  distribute = strategy.experimental_distribute_dataset
  auto = tf.data.experimental.AutoShardPolicy.AUTO

  def by_data(dataset, options=None):
    if dataset.options().experimental_distribute.auto_shard_policy == auto:
      data_options = tf.data.Options()
      data_options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
      )
      dataset = dataset.with_options(data_options)
    return distribute(dataset, options)

  strategy.experimental_distribute_dataset = by_data


def infer_num_classes(files: Sequence[str], features: FeatureSpec) -> int:
  """Returns max(label) + 1 over the given files (one pass over the labels only).

  Args:
    files: TFRecord files.
    features: the input layout (for the label key).

  Returns:
    The number of classes.
  """
  import tensorflow as tf

  compression = "GZIP" if files[0].endswith(".gz") else ""
  spec = {features.label_key: tf.io.FixedLenFeature([], tf.int64)}
  ds = tf.data.TFRecordDataset(list(files), compression_type=compression).batch(4096)
  ds = ds.map(lambda s: tf.reduce_max(tf.io.parse_example(s, spec)[features.label_key]))
  return int(ds.reduce(tf.constant(-1, tf.int64), tf.maximum).numpy()) + 1


@dataclasses.dataclass
class TrainConfig:
  """Everything the build_model path needs, as plain values.

  Attributes:
    train_files: training file patterns.
    eval_files: evaluation file patterns.
    schema_path: schema.pbtxt path.
    model_dir: the Model artifact uri; Format-Serving and Format-Keras go below it.
    model_run_dir: the ModelRun uri (TensorBoard logs, backup, progress, results).
    train_steps: total optimizer steps (None: DEFAULT_TRAIN_STEPS).
    eval_steps: eval batches (None: the whole eval split).
    label_key: label feature.
    num_classes: classes (None: read from the training labels).
    global_batch_size: examples per step over all replicas.
    num_epochs: fit epochs the steps are split into (BackupAndRestore saves per epoch).
    steps_per_execution: steps per tf.function call when the trainer compiles.
    mixed_precision: '', 'mixed_float16' or 'mixed_bfloat16'.
    learning_rate: Adam learning rate when the trainer compiles.
    hparams: extra hyperparameters passed to build_model.
    base_model_dir: Format-Serving dir of a model to warm-start from, or None.
    seed: shuffle and weight-initialisation seed.
  """

  train_files: list[str]
  eval_files: list[str]
  schema_path: str
  model_dir: str
  model_run_dir: str
  train_steps: int | None = None
  eval_steps: int | None = None
  label_key: str = DEFAULT_LABEL_KEY
  num_classes: int | None = None
  global_batch_size: int = DEFAULT_GLOBAL_BATCH_SIZE
  num_epochs: int = DEFAULT_NUM_EPOCHS
  steps_per_execution: int = DEFAULT_STEPS_PER_EXECUTION
  mixed_precision: str = ""
  learning_rate: float = DEFAULT_LEARNING_RATE
  hparams: dict[str, Any] = dataclasses.field(default_factory=dict)
  base_model_dir: str | None = None
  seed: int = DEFAULT_SHUFFLE_SEED


@dataclasses.dataclass
class TrainResult:
  """What one training process reports (written as JSON under model_run_dir).

  Attributes:
    strategy: chosen strategy name.
    strategy_reason: why it was chosen.
    num_replicas_in_sync: replicas of the strategy.
    task_type: TF_CONFIG task type.
    task_index: TF_CONFIG task index.
    is_chief: whether this process exported.
    module_style: 'build_model' or 'run_fn'.
    eval_accuracy: accuracy on the eval split (chief, build_model path), else None.
    initial_epoch: first epoch this process ran (> 0 after a BackupAndRestore resume).
    epochs: epochs of the fit.
    steps_per_epoch: steps per epoch.
    train_seconds: wall time of fit.
    train_examples_per_sec: global examples per second after the first epoch.
    weights_sha256: digest of the trained weights (equal on all MWMS workers).
  """

  strategy: str
  strategy_reason: str
  num_replicas_in_sync: int
  task_type: str
  task_index: int
  is_chief: bool
  module_style: str
  eval_accuracy: float | None = None
  initial_epoch: int | None = None
  epochs: int | None = None
  steps_per_epoch: int | None = None
  train_seconds: float | None = None
  train_examples_per_sec: float | None = None
  weights_sha256: str | None = None


def run_state_dir(model_run_dir: str, *parts: str) -> str:
  """Returns a path inside the trainer's own folder of model_run_dir."""
  return os.path.join(model_run_dir, RUN_STATE_DIR, *parts)


def result_path(model_run_dir: str, task_type: str, task_index: int) -> str:
  """Returns where the process (task_type, task_index) writes its TrainResult."""
  return run_state_dir(model_run_dir, _RESULTS_DIR, f"{task_type}-{task_index}.json")


def progress_path(model_run_dir: str, task_type: str, task_index: int) -> str:
  """Returns the JSON-lines epoch log of the process (task_type, task_index)."""
  return run_state_dir(model_run_dir, _PROGRESS_DIR, f"{task_type}-{task_index}.jsonl")


def write_result(model_run_dir: str, result: TrainResult) -> str:
  """Writes a TrainResult atomically and returns its path."""
  import tensorflow as tf

  path = result_path(model_run_dir, result.task_type, result.task_index)
  tf.io.gfile.makedirs(os.path.dirname(path))
  tmp = f"{path}.tmp-{uuid.uuid4().hex}"
  with tf.io.gfile.GFile(tmp, "w") as f:
    f.write(json.dumps(dataclasses.asdict(result), indent=2, sort_keys=True))
  tf.io.gfile.rename(tmp, path, overwrite=True)
  return path


def read_result(path: str) -> TrainResult:
  """Reads a TrainResult written by `write_result`."""
  import tensorflow as tf

  with tf.io.gfile.GFile(path) as f:
    return TrainResult(**json.loads(f.read()))


def read_progress(model_run_dir: str, task_type: str, task_index: int) -> list[dict[str, Any]]:
  """Returns the epoch events of one process ([] before it starts)."""
  path = progress_path(model_run_dir, task_type, task_index)
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def _progress_callback(path: str, attempt: int, epoch_times: list[float]):
  """Epoch-level callback (no batch hooks, so ParameterServerStrategy accepts it).

  Events always go to the log; on a local model_run_dir they are also appended to `path`
  (object stores such as gs:// cannot append, and only local runs get restarted by us).
  """
  import tensorflow as tf

  local = "://" not in path
  if local:
    os.makedirs(os.path.dirname(path), exist_ok=True)

  class _Progress(tf.keras.callbacks.Callback):
    """Records epoch begin/end; listed after BackupAndRestore so an 'end' is backed up."""

    def __init__(self):
      super().__init__()
      self._start = 0.0

    def _write(self, event: str, epoch: int) -> None:
      _LOG.info("%s %d (attempt %d)", event, epoch, attempt)
      if not local:
        return
      with open(path, "a") as f:
        f.write(json.dumps({"event": event, "epoch": epoch, "attempt": attempt}) + "\n")
        f.flush()
        os.fsync(f.fileno())

    def on_epoch_begin(self, epoch, logs=None):
      self._start = time.perf_counter()
      self._write("epoch_begin", epoch)

    def on_epoch_end(self, epoch, logs=None):
      epoch_times.append(time.perf_counter() - self._start)
      self._write("epoch_end", epoch)

  return _Progress()


def _backup_callback(backup_dir: str):
  """BackupAndRestore that also accepts OneDeviceStrategy.

  tf_keras 2.16 rejects OneDeviceStrategy only by its allow-list; its checkpointing works
  there as under the default strategy, and single-process runs get restarted too (pod
  retries), so they resume as well.
  """
  import tensorflow as tf

  callback = tf.keras.callbacks.BackupAndRestore(backup_dir)
  callback._supported_strategies = (
    *callback._supported_strategies,
    tf.distribute.OneDeviceStrategy,
  )
  return callback


def _is_compiled(model) -> bool:
  return bool(getattr(model, "_is_compiled", False)) and model.optimizer is not None


def _compile(model, config: TrainConfig) -> None:
  import tensorflow as tf

  model.compile(
    optimizer=tf.keras.optimizers.Adam(config.learning_rate),
    loss=tf.keras.losses.SparseCategoricalCrossentropy(),
    metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    steps_per_execution=config.steps_per_execution,
  )


def _weights_digest(weights: Sequence[Any]) -> str:
  digest = hashlib.sha256()
  for w in weights:
    digest.update(w.tobytes())
  return digest.hexdigest()


def _check_model(model, num_features: int, num_classes: int) -> None:
  import tensorflow as tf

  if not isinstance(model, tf.keras.Model):
    raise TrainerInputError(
      f"build_model returned {type(model).__name__}; it must return a tf.keras.Model"
    )
  inputs = getattr(model, "inputs", None)
  if not inputs or len(inputs) != 1 or inputs[0].shape[-1] != num_features:
    raise TrainerInputError(
      "build_model must return a functional or Sequential model with ONE float input of shape "
      f"[batch, {num_features}] (hparams['num_features']); got inputs {inputs}"
    )
  if model.outputs[0].shape[-1] != num_classes:
    raise TrainerInputError(
      f"build_model returned {model.outputs[0].shape[-1]} outputs; it must return "
      f"hparams['num_classes']={num_classes} class probabilities"
    )


def _warm_start(model, base_model_dir: str) -> None:
  import tensorflow as tf

  h5 = os.path.join(os.path.dirname(base_model_dir.rstrip("/")), KERAS_DIR, KERAS_MODEL_FILE)
  try:
    if tf.io.gfile.exists(h5):
      model.load_weights(h5)
    else:
      model.set_weights(tf.keras.models.load_model(base_model_dir, compile=False).get_weights())
  except ValueError as e:
    raise TrainerInputError(
      f"cannot warm-start from {base_model_dir}: its weights do not fit the model from "
      f"build_model ({e}); pass a base_model trained with the same module, or none"
    ) from e
  _LOG.info("Warm-started from %s", base_model_dir)


def hparams_for(config: TrainConfig, features: FeatureSpec, num_classes: int) -> dict[str, Any]:
  """Returns the dict passed to build_model: layout keys plus the user's hparams."""
  return {
    "learning_rate": config.learning_rate,
    **config.hparams,
    "num_features": len(features.feature_keys),
    "num_classes": num_classes,
    "feature_keys": list(features.feature_keys),
  }


def evaluate_accuracy(model, dataset) -> float:
  """Returns top-1 accuracy of a probability model over a (x, y) dataset."""
  import numpy as np

  correct = total = 0
  for x, y in dataset:
    pred = np.argmax(model(x, training=False).numpy(), axis=-1)
    correct += int((pred == y.numpy()).sum())
    total += int(y.shape[0])
  if not total:
    raise TrainerInputError("the eval split is empty; give the ExampleGen an eval split with rows")
  return correct / total


def export_serving_model(model, features: FeatureSpec, export_dir: str) -> None:
  """Saves a SavedModel whose serving_default maps serialized tf.Examples to probabilities.

  Args:
    model: Keras model taking float32 [batch, num_features].
    features: the input layout.
    export_dir: target folder (must not exist).
  """
  import tensorflow as tf

  parse_spec = features.parse_spec(with_label=False)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=SERVING_INPUT_NAME)])
  def serve(examples):
    dense = features.to_dense(tf.io.parse_example(examples, parse_spec))
    return {SERVING_OUTPUT_NAME: tf.cast(model(dense, training=False), tf.float32)}

  model.save(
    export_dir,
    save_format="tf",
    include_optimizer=False,
    signatures={"serving_default": serve.get_concrete_function()},
  )


def export_keras_model(model, features: FeatureSpec, num_classes: int, export_dir: str) -> None:
  """Saves `model.h5` and `input_spec.json` (the layout the Optimizer reads).

  Args:
    model: Keras model taking float32 [batch, num_features].
    features: the input layout.
    num_classes: number of classes.
    export_dir: target folder.

  Raises:
    TrainerInputError: when the model cannot be stored as HDF5.
  """
  import tensorflow as tf

  tf.io.gfile.makedirs(export_dir)
  try:
    model.save(
      os.path.join(export_dir, KERAS_MODEL_FILE), save_format="h5", include_optimizer=False
    )
  except NotImplementedError as e:
    raise TrainerInputError(
      "build_model must return a functional or Sequential model made of serialisable layers so "
      f"it can be saved as HDF5 ({e})"
    ) from e
  spec = {
    "feature_keys": list(features.feature_keys),
    "label_key": features.label_key,
    "num_classes": int(num_classes),
  }
  with tf.io.gfile.GFile(os.path.join(export_dir, INPUT_SPEC_FILE), "w") as f:
    f.write(json.dumps(spec, indent=2))


def publish_exports(model_dir: str, write: Callable[[str, str], None]) -> None:
  """Writes both exports into a staging folder, then renames them into place.

  Args:
    model_dir: the Model artifact uri.
    write: called as write(serving_dir, keras_dir) with staging paths.
  """
  import tensorflow as tf

  staging = os.path.join(model_dir, f".staging-{uuid.uuid4().hex}")
  try:
    write(os.path.join(staging, SERVING_DIR), os.path.join(staging, KERAS_DIR))
    for name in (SERVING_DIR, KERAS_DIR):
      final = os.path.join(model_dir, name)
      if tf.io.gfile.exists(final):
        tf.io.gfile.rmtree(final)
      tf.io.gfile.rename(os.path.join(staging, name), final)
  finally:
    if tf.io.gfile.exists(staging):
      tf.io.gfile.rmtree(staging)


def train_build_model(
  build_model: Callable[[dict[str, Any]], Any],
  config: TrainConfig,
  built: strategy_lib.BuiltStrategy,
  attempt: int = 0,
) -> TrainResult:
  """Trains a `build_model(hparams)` module under a strategy; the chief evaluates and exports.

  The model is built (and compiled, unless build_model compiled it: then its own compile
  settings, steps_per_execution included, are kept) inside `strategy.scope()`. Training runs
  `fit` for `num_epochs` epochs with TensorBoard and BackupAndRestore in model_run_dir. After
  training the chief copies the weights into a fresh, undistributed model, evaluates it on
  the eval split and exports Format-Serving and Format-Keras.

  Args:
    build_model: the module's build_model function.
    config: plain training settings.
    built: the strategy for this process.
    attempt: restart count of the surrounding cluster (recorded in the progress log).

  Returns:
    This process's TrainResult (also written under model_run_dir).

  Raises:
    TrainerInputError: bad schema, data, settings or model.
  """
  import tensorflow as tf

  skip_autograph_for_tf_keras()
  if config.mixed_precision not in MIXED_PRECISION_POLICIES:
    raise TrainerInputError(
      f"mixed_precision={config.mixed_precision!r}; use one of {MIXED_PRECISION_POLICIES}"
    )
  features = read_feature_spec(config.schema_path, config.label_key)
  train_files = list_files(config.train_files)
  eval_files = list_files(config.eval_files)
  num_classes = config.num_classes or infer_num_classes(train_files, features)
  hparams = hparams_for(config, features, num_classes)
  train_steps = config.train_steps or DEFAULT_TRAIN_STEPS
  epochs = max(1, min(config.num_epochs, train_steps))
  steps_per_epoch = math.ceil(train_steps / epochs)

  previous_policy = tf.keras.mixed_precision.global_policy()
  if config.mixed_precision:
    tf.keras.mixed_precision.set_global_policy(config.mixed_precision)
  try:
    # Same initial weights in every process and run, so runs under different strategies
    # differ only by the strategy.
    tf.keras.utils.set_random_seed(config.seed)
    with built.strategy.scope():
      model = build_model(hparams)
      _check_model(model, len(features.feature_keys), num_classes)
      if config.base_model_dir:
        _warm_start(model, config.base_model_dir)
      if not _is_compiled(model):
        _compile(model, config)
    train_input = make_train_input(
      built, train_files, features, config.global_batch_size, config.seed
    )
    epoch_times: list[float] = []
    progress = progress_path(config.model_run_dir, built.task_type, built.task_index)
    callbacks = [
      _backup_callback(run_state_dir(config.model_run_dir, _BACKUP_DIR)),
      tf.keras.callbacks.TensorBoard(os.path.join(config.model_run_dir, _TENSORBOARD_DIR)),
      _progress_callback(progress, attempt, epoch_times),
    ]
    start = time.perf_counter()
    history = model.fit(
      train_input,
      epochs=epochs,
      steps_per_epoch=steps_per_epoch,
      callbacks=callbacks,
      verbose=0,
    )
    train_seconds = time.perf_counter() - start
    # history.epoch lists the epochs this fit ran; it starts late after a backup restore.
    initial_epoch = history.epoch[0] if history.epoch else epochs
    weights = model.get_weights()
    result = TrainResult(
      strategy=built.choice.name,
      strategy_reason=built.choice.reason,
      num_replicas_in_sync=built.num_replicas_in_sync,
      task_type=built.task_type,
      task_index=built.task_index,
      is_chief=built.is_chief,
      module_style="build_model",
      initial_epoch=initial_epoch,
      epochs=epochs,
      steps_per_epoch=steps_per_epoch,
      train_seconds=train_seconds,
      train_examples_per_sec=_examples_per_sec(
        epoch_times, steps_per_epoch, config.global_batch_size
      ),
      weights_sha256=_weights_digest(weights),
    )
    if built.is_chief:
      # A fresh model outside the strategy scope: evaluation and export then need no
      # collectives with the other workers and carry no distribution state.
      plain = build_model(hparams)
      plain.set_weights(weights)
      eval_ds = make_dataset(eval_files, features, config.global_batch_size, training=False)
      if config.eval_steps:
        eval_ds = eval_ds.take(config.eval_steps)
      result.eval_accuracy = evaluate_accuracy(plain, eval_ds)
      _LOG.info("DistributedTrainer eval_accuracy=%.4f", result.eval_accuracy)

      def write(serving_dir: str, keras_dir: str) -> None:
        export_serving_model(plain, features, serving_dir)
        export_keras_model(plain, features, num_classes, keras_dir)

      publish_exports(config.model_dir, write)
  finally:
    tf.keras.mixed_precision.set_global_policy(previous_policy)
  write_result(config.model_run_dir, result)
  return result


def _examples_per_sec(epoch_times: Sequence[float], steps: int, batch: int) -> float | None:
  # The first epoch pays for tracing and warm-up; measure the steady state after it.
  steady = list(epoch_times[1:]) or list(epoch_times)
  if not steady or sum(steady) <= 0:
    return None
  return steps * batch * len(steady) / sum(steady)
