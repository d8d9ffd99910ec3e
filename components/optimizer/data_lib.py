"""Loads the trained Keras model and the rows it is measured on, for any trainer module."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from tfx import types
from tfx.types import artifact_utils

from components import columnar, model_contract, records
from components.optimizer.formats import keras_model
from core import column_types, errors, properties, tasks
from core.errors import UserInputError

_LOG = logging.getLogger(__name__)
_BATCH = 512

Inputs = dict[str, np.ndarray]


class OptimizerInputError(UserInputError):
  """The model, Examples or schema cannot be measured together; the message names the fix."""


class UnmeasurableModelError(OptimizerInputError):
  """The model is out of the Optimizer's reach (no call function to convert, inputs that are
  not named after features): its variants are skipped and the pipeline goes on without them."""


@dataclasses.dataclass
class Sample:
  """Rows fed to the model, and their labels.

  Attributes:
    inputs: model input name -> array [rows, ...] of the input's dtype.
    labels: [rows] labels as the model is trained against them (class ids or values).
  """

  inputs: Inputs
  labels: np.ndarray

  def __len__(self) -> int:
    return len(self.labels)

  def take(self, rows: int) -> Sample:
    return Sample({k: v[:rows] for k, v in self.inputs.items()}, self.labels[:rows])


def load_keras_model(serving_dir: str):
  """Loads the Keras model behind the Trainer's serving SavedModel (`Format-Serving`).

  Every Keras `run_fn` writes one. A SavedModel that `model.save` wrote comes back as the
  Keras model. One that `tf.saved_model.save` wrote (TFX's example modules) keeps no Keras
  config, only the traced call: its inference function (training=False) comes back wrapped in
  a functional model of one `keras_model.RestoredCall` layer, with an Input per tensor argument
  named as its spec.

  The model's custom Keras layers load as themselves once the module that built it was
  imported (`model_contract.import_trainer_module`, which the executor calls first).

  Raises:
    UnmeasurableModelError: when the SavedModel has no inference function to convert.
  """
  if not tf.io.gfile.exists(os.path.join(serving_dir, "keras_metadata.pb")):
    return _restored_model(serving_dir)
  model = tf.keras.models.load_model(serving_dir, compile=False)
  # Modules attach objects to the model for their signatures (the TFX examples attach the
  # Transform layer as `model.tft_layer`); they come back as layers outside the graph, which
  # cannot be cloned or saved. The model proper is the graph from its inputs to its outputs.
  return tf.keras.Model(model.input, model.output, name=model.name)


def _restored_model(serving_dir: str) -> tf.keras.Model:
  restored = tf.saved_model.load(serving_dir)
  try:
    function, specs = _inference_function(restored)
  except ValueError as e:
    raise UnmeasurableModelError(
      f"{serving_dir} is not a Keras SavedModel (no keras_metadata.pb) and {e}; converting a "
      f"SavedModel's signatures ({sorted(restored.signatures)}) is out of the Optimizer's "
      "scope: save the Keras model in run_fn, with model.save(..., save_format='tf') or "
      "tf.saved_model.save(model, ...)."
    ) from None
  inputs = {s.name: tf.keras.Input(s.shape[1:], dtype=s.dtype, name=s.name) for s in specs}
  output = keras_model.RestoredCall(restored, function, name="restored_call")(inputs)
  return tf.keras.Model(inputs, output, name="restored_model")


def _inference_function(restored):
  """The restored object's call function to convert (training=False), and its tensor specs.

  Raises:
    ValueError: saying why there is none.
  """
  call = restored.__call__ if callable(restored) else None
  functions = list(getattr(call, "concrete_functions", ()))
  if not functions:
    raise ValueError("has no call function, only signatures (a tf.Module, not a Keras model)")

  def training(function):
    args, kwargs = function.structured_input_signature
    named = dict(zip(function.function_type.parameters, args, strict=False))
    return {**named, **kwargs}.get("training")

  if any(training(f) is not None for f in functions):
    functions = [f for f in functions if training(f) is False]
    if not functions:
      raise ValueError("has no call function traced with training=False")
  elif len(functions) > 1:
    raise ValueError(f"has {len(functions)} call functions and no training argument to choose by")
  function = functions[0]
  specs = [
    x for x in tf.nest.flatten(function.structured_input_signature) if isinstance(x, tf.TensorSpec)
  ]
  names = [s.name for s in specs]
  if not specs or None in names or len(set(names)) != len(names):
    raise ValueError(f"has a call function whose inputs are not uniquely named ({names})")
  return function, specs


def input_specs(model) -> dict[str, tf.TensorSpec]:
  """The model's inputs as name -> TensorSpec (shape with a None batch dimension)."""
  specs = {}
  for tensor in model.inputs:
    name = tensor.name.split(":")[0]
    specs[name] = tf.TensorSpec(tensor.shape, tensor.dtype, name=name)
  return specs


def _split_files(examples: types.Artifact, split: str) -> list[str]:
  needs = (
    f"the Optimizer needs an Examples artifact with {properties.TRAIN_SPLIT!r} and "
    f"{properties.EVAL_SPLIT!r} splits."
  )
  try:
    split_uri = artifact_utils.get_split_uri([examples], split)
  except ValueError:  # The artifact's split_names do not list it.
    names = artifact_utils.decode_split_names(examples.split_names)
    raise OptimizerInputError(
      f"{examples.uri} has no split {split!r} (it has {names}); {needs}"
    ) from None
  files = sorted(tf.io.gfile.glob(os.path.join(split_uri, "*")))
  if not files:
    raise OptimizerInputError(f"no files in {split_uri}; {needs}")
  return files


# A split's columnar copy holding more rows than this is sampled in two stages (record
# batches, then rows) so that the draw reads about this many rows, not all of them: drawing
# 2,000 of 8,000,000 rows read and decompressed every batch, 6.4 s of the Optimizer's 27 s.
_READ_ROWS = 500_000


@dataclasses.dataclass(frozen=True)
class SampleInfo:
  """How a sample was drawn from its split.

  Attributes:
    rows: rows drawn.
    of: rows in the split.
    every: every how many records one was drawn (of the batches read).
    start: the first record drawn (0-based, chosen at random below `every`).
    batch_every: every how many record batches of the columnar copy one was read, from a
      random start; 1 where all of them were.
  """

  rows: int
  of: int
  every: int
  start: int
  batch_every: int = 1

  def describe(self) -> str:
    if self.every == 1 and self.batch_every == 1:
      return f"all {self.of:,} rows"
    if self.batch_every == 1:
      drawn = f"every {self.every}th record from a random start"
    else:
      drawn = (
        f"every {self.every}th record of every {self.batch_every}th record batch, from random "
        "starts"
      )
    return (
      f"{self.rows:,} of {self.of:,} rows ({drawn}, so the sample spans the whole split however "
      "its files are sorted)"
    )


def _batch_positions(
  sizes: Sequence[int], max_rows: int, rng: np.random.Generator
) -> tuple[np.ndarray, int, int, int]:
  """Row positions of a two-stage systematic sample of a split of record batches `sizes`:
  every m-th batch from a random start, so that about `_READ_ROWS` rows are read, then every
  k-th row of those from a random start.

  Returns:
    (sorted positions across the split, k, the first row's place among the batches read, m).
  """
  total = int(sum(sizes))
  batch_every = max(1, -(-total // _READ_ROWS))
  batch_every = min(batch_every, len(sizes))
  chosen = np.arange(int(rng.integers(batch_every)), len(sizes), batch_every)
  starts = np.concatenate([[0], np.cumsum(sizes)])[chosen]
  lengths = np.asarray(sizes, dtype=np.int64)[chosen]
  read = int(lengths.sum())
  every = max(1, -(-read // max_rows))
  start = int(rng.integers(every))
  local = np.arange(start, read, every, dtype=np.int64)[:max_rows]
  ends = np.cumsum(lengths)
  which = np.searchsorted(ends, local, side="right")
  positions = starts[which] + local - (ends[which] - lengths[which])
  return positions, every, start, batch_every


def _sample_records(
  files: Sequence[str], max_rows: int, seed: int, total: int | None = None
) -> tuple[list[bytes], SampleInfo]:
  """Up to `max_rows` serialized records spread evenly over the files, in random order.

  A systematic sample: every k-th record from a random start, k = ceil(rows / max_rows), so
  that a file sorted by a column (by class, by price) is sampled over its whole range. The
  records are counted and skipped inside tf.data; only the drawn ones reach Python, so a split
  of a million rows costs a read of its files, not a Python loop over them. The order is then
  shuffled, so any head of the sample (int8 calibration takes one) is a sample of the split.

  Where the split has the ExampleGen's columnar copy, the same rows are read from it and only
  they are encoded as tf.Examples: on 10,000,000 rows, reading both splits' shards took 34 s of
  the Optimizer's 43. A copy of more than `_READ_ROWS` rows is sampled in two stages, every
  m-th record batch and every k-th row of those, so that only the batches drawn from are read.
  """
  compression = "GZIP" if files[0].endswith(".gz") else ""
  copies = columnar.complete_files(files, tf.io.gfile.exists)
  sizes = columnar.batch_sizes(copies) if copies is not None else None
  if sizes is not None:
    total = sum(sizes)
  elif total is None:
    total = records.count_records(files)
  rng = np.random.default_rng(seed)
  drawn = None
  if sizes is not None and total > _READ_ROWS and len(sizes) > 1:
    positions, every, start, batch_every = _batch_positions(sizes, max_rows, rng)
    if len(positions):  # Else the batches drawn hold no rows: the split is read in one stage.
      drawn = columnar.sampled_examples(copies, positions, sizes)
  if drawn is None:  # One stage: the copy read whole, or the shards through tf.data.
    rng, batch_every = np.random.default_rng(seed), 1
    every = max(1, -(-total // max_rows))
    start = int(rng.integers(every))
    if copies is not None:
      positions = np.arange(start, total, every, dtype=np.int64)[:max_rows]
      drawn = columnar.sampled_examples(copies, positions, sizes)
  if drawn is None:
    dataset = tf.data.TFRecordDataset(list(files), compression_type=compression)
    picked = dataset.skip(start).shard(every, 0).take(max_rows).batch(4096)
    drawn = [r for batch in picked.as_numpy_iterator() for r in batch]
  order = rng.permutation(len(drawn))
  info = SampleInfo(len(drawn), total, every, start, batch_every)
  return [drawn[i] for i in order], info


def _dense(value, default) -> tf.Tensor:
  """A parsed feature (dense, sparse or ragged) as a dense [rows, width] tensor."""
  if isinstance(value, tf.SparseTensor):
    value = tf.sparse.to_dense(value, default_value=default)
  elif isinstance(value, tf.RaggedTensor):
    value = value.to_tensor(default_value=default)
  if value.shape.rank == 1:
    value = tf.expand_dims(value, 1)
  return value


def _default_for(dtype) -> Any:
  if dtype == tf.string:
    return b""
  return tf.constant(float("nan") if dtype.is_floating else 0, dtype)


class RowReader:
  """Turns serialized tf.Examples into the model's inputs and labels.

  The rows are parsed with the model's contract, or with the schema (the way a stock module
  reads them), passed through the Transform graph when there is one, and matched to the
  model's inputs by name. Labels are the model's own view of them: its `transform_features`
  signature when it has one, the transformed label after a Transform, the raw column otherwise.
  """

  def __init__(
    self,
    model,
    serving_dir: str,
    schema_path: str | None,
    label_key: str,
    transform_graph_uri: str | None = None,
  ):
    self._model = model
    self._specs = input_specs(model)
    self._label_key = label_key
    self._contract = model_contract.read_contract(serving_dir)
    self._tft = None
    self._schema = None
    if transform_graph_uri:
      import tensorflow_transform as tft

      self._tft = tft.TFTransformOutput(transform_graph_uri)
      self._schema = self._tft.raw_metadata.schema
    elif schema_path:
      self._schema = model_contract.read_schema(schema_path)
    self._signature = None
    if self._contract is None:
      saved = tf.saved_model.load(serving_dir)
      fn = saved.signatures.get(model_contract.TRANSFORM_SIGNATURE)
      if fn is not None and label_key in fn.structured_outputs:
        self._signature = (saved, fn)

  @property
  def includes_preprocessing(self) -> bool:
    """Whether the model takes raw columns (False when a Transform graph comes before it)."""
    return self._tft is None

  def read(self, serialized: Sequence[bytes]) -> Sample:
    """Model inputs and labels of a list of serialized tf.Examples."""
    inputs: dict[str, list[np.ndarray]] = {name: [] for name in self._specs}
    labels: list[np.ndarray] = []
    for start in range(0, len(serialized), _BATCH):
      batch = tf.constant(list(serialized[start : start + _BATCH]))
      features, label = self._features_and_label(batch)
      for name, spec in self._specs.items():
        inputs[name].append(self._fit(name, spec, features))
      labels.append(label)
    return Sample(
      {k: np.concatenate(v, axis=0) for k, v in inputs.items()}, np.concatenate(labels, axis=0)
    )

  def _features_and_label(self, batch):
    if self._contract is not None:
      columns = model_contract.contract_columns(self._contract)
      features = model_contract.parse_columns(batch, columns)
      info = tasks.LabelInfo.from_json(self._contract.label)
      dtype = self._contract.label.get("stored_as") or _guess_dtype(info)
      raw = model_contract.parse_label(batch, info.key, dtype)
      label = model_contract.label_target(raw, info, dtype)
      return features, label.numpy()
    if self._schema is None:
      raise OptimizerInputError(
        "the model has no contract file and the Optimizer got no schema; wire "
        "schema=schema_gen.outputs['schema'] into the Optimizer."
      )
    from tensorflow_transform.tf_metadata import schema_utils

    spec = schema_utils.schema_as_feature_spec(self._schema).feature_spec
    raw = parsed = tf.io.parse_example(batch, spec)
    if self._tft is not None:
      parsed = self._tft.transform_features_layer()(raw)
    if self._signature is not None:
      label = self._signature[1](examples=batch)[self._label_key]
    else:
      raw_label = raw.get(self._label_key)
      view = tasks.label_view(
        self._label_key,
        set(parsed) if self._tft is not None else None,
        None if raw_label is None else raw_label.dtype == tf.string,
      )
      label = parsed[self._label_key] if view == tasks.TRANSFORMED else raw_label
    label = _dense(label, _default_for(label.dtype))[:, 0]
    return parsed, label.numpy()

  def _fit(self, name: str, spec: tf.TensorSpec, features: dict[str, Any]) -> np.ndarray:
    if name not in features:
      raise UnmeasurableModelError(
        f"the model has an input {name!r} that no {'transformed ' if self._tft else ''}feature "
        f"of the data is named after (features: {sorted(features)[:8]}...); the Optimizer feeds "
        "inputs by name, so name the Keras inputs after the features."
      )
    value = as_input(name, _dense(features[name], _default_for(features[name].dtype)), spec)
    shape = [d if d is not None else -1 for d in spec.shape.as_list()]
    return tf.reshape(value, shape).numpy()


def as_input(name: str, value: tf.Tensor, spec: tf.TensorSpec) -> tf.Tensor:
  """A dense feature in the dtype of the model's input `name`.

  Text meets a number input where the schema typed a column as bytes while the model reads it
  as numbers: a column without a single value in the data SchemaGen saw (TFX's taxi CSV has
  one such column in its first 5,000 rows) is read with an empty string for every row. Empty
  cells become the number input's missing value (NaN, or 0 for whole numbers), other text is
  parsed; text that is not a number means the Optimizer cannot feed the model as the Trainer
  fed it, so its variants are skipped with that reason.

  Raises:
    UnmeasurableModelError: when a text feature holds something that is not a number.
  """
  if value.dtype == spec.dtype:
    return value
  if value.dtype != tf.string or not (spec.dtype.is_floating or spec.dtype.is_integer):
    return tf.cast(value, spec.dtype)
  missing = "nan" if spec.dtype.is_floating else "0"
  filled = tf.where(tf.strings.length(tf.strings.strip(value)) == 0, missing, value)
  try:
    numbers = tf.strings.to_number(filled, out_type=tf.float64)
  except tf.errors.InvalidArgumentError as e:
    raise UnmeasurableModelError(
      f"the model's input {name!r} takes {spec.dtype.name} but its feature holds text that is "
      f"not a number ({errors.first_line(e)}); the Optimizer feeds the model its features "
      "as they are, so give the module's preprocessing the conversion it needs."
    ) from None
  return tf.cast(numbers, spec.dtype)


def _guess_dtype(info: tasks.LabelInfo) -> str:
  classes = info.classes
  if classes and isinstance(classes[0], str):
    return column_types.STORED_STRING
  if classes and all(isinstance(c, int) for c in classes):
    return column_types.STORED_INT64
  return column_types.STORED_FLOAT32


def read_sample(
  reader: RowReader,
  examples: types.Artifact,
  split: str,
  max_rows: int,
  seed: int = 0,
  total: int | None = None,
) -> tuple[Sample, SampleInfo]:
  """Up to `max_rows` rows spread over one split, in random order, as model inputs.

  Args:
    reader: turns the records into model inputs and labels.
    examples: the Examples artifact.
    split: the split to read.
    max_rows: the most rows to draw.
    seed: seeds which rows are drawn and their order.
    total: the split's row count when the ExampleGen recorded it (saves a pass to count).

  Returns:
    (the rows, how they were drawn).

  Raises:
    OptimizerInputError: when the split is missing or empty.
  """
  drawn, info = _sample_records(_split_files(examples, split), max_rows, seed, total)
  if not drawn:
    raise OptimizerInputError(f"split {split!r} of {examples.uri} has no rows.")
  return reader.read(drawn), info


def model_task(contract: model_contract.ModelContract | None, requested: str | None, model) -> str:
  """The task to measure: the contract's, else the pipeline's, else guessed from the output."""
  if contract is not None:
    return contract.task
  if requested and requested in tasks.TASKS:
    return requested
  width = int(model.outputs[0].shape[-1] or 1)
  return tasks.MULTICLASS if width > 1 else tasks.REGRESSION
