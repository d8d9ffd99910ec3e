"""Reads an Examples split (gzipped TFRecords of tf.train.Example) into numpy arrays."""

import dataclasses
import glob
import json
import os

import numpy as np
import tensorflow as tf

from components.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class InputSpec:
  """The Format-Keras `input_spec.json`: how to build a model input row from an example."""

  feature_keys: tuple[str, ...]
  label_key: str
  num_classes: int


def read_input_spec(keras_model_dir: str) -> InputSpec:
  """Reads `input_spec.json` from a Format-Keras folder.

  Args:
    keras_model_dir: the folder holding model.h5 and input_spec.json.

  Returns:
    The parsed spec.

  Raises:
    FileNotFoundError: if the file is missing.
    ValueError: if it lacks feature_keys.
  """
  with open(os.path.join(keras_model_dir, "input_spec.json")) as f:
    spec = json.load(f)
  if not spec.get("feature_keys"):
    raise ValueError(f"input_spec.json in {keras_model_dir} lists no feature_keys.")
  return InputSpec(
    feature_keys=tuple(spec["feature_keys"]),
    label_key=spec.get("label_key", "label"),
    num_classes=int(spec.get("num_classes", 0)),
  )


def split_files(split_dir: str) -> list[str]:
  """Lists the gzipped TFRecord files of one split folder (`Split-<name>`).

  Raises:
    UserInputError: if the folder holds no `*.gz` files.
  """
  files = sorted(glob.glob(os.path.join(split_dir, "*.gz")))
  if not files:
    raise UserInputError(
      f"No gzipped TFRecord files (*.gz) in {split_dir}; point the Optimizer at an ExampleGen "
      "output with train and eval splits."
    )
  return files


def _sample_records(files: list[str], max_rows: int, seed: int) -> list[bytes]:
  """Reservoir-samples up to `max_rows` serialized records, kept in file order."""
  rng = np.random.default_rng(seed)
  kept: list[tuple[int, bytes]] = []
  dataset = tf.data.TFRecordDataset(files, compression_type="GZIP")
  for index, record in enumerate(dataset.as_numpy_iterator()):
    if index < max_rows:
      kept.append((index, record))
    else:
      slot = int(rng.integers(0, index + 1))
      if slot < max_rows:
        kept[slot] = (index, record)
  kept.sort(key=lambda item: item[0])
  return [record for _, record in kept]


def _scalar(example: tf.train.Example, key: str, row: int) -> float:
  feature = example.features.feature.get(key)
  kind = feature.WhichOneof("kind") if feature is not None else None
  if kind not in ("int64_list", "float_list") or len(getattr(feature, kind).value) != 1:
    raise UserInputError(
      f"Example {row} has no single numeric value for feature {key!r}; the Optimizer needs "
      "scalar int64 or float features matching input_spec.json."
    )
  return getattr(feature, kind).value[0]


def read_split(
  split_dir: str,
  feature_keys: tuple[str, ...] | list[str],
  label_key: str,
  max_rows: int,
  seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
  """Reads a split into dense features and labels.

  Feature dtypes come from the parsed examples (int64 or float lists), so no schema is needed.
  When the split has more than `max_rows` records, a uniform random sample of that many is
  taken (reservoir sampling over the serialized records, parsing only those kept).

  Args:
    split_dir: the `Split-<name>` folder.
    feature_keys: the model's input columns, in input order.
    label_key: the label column (int class id).
    max_rows: cap on rows returned.
    seed: seeds the sample.

  Returns:
    (x float32 [rows, len(feature_keys)], y int64 [rows]).

  Raises:
    UserInputError: if the split has no files or an example lacks a feature or the label.
  """
  records = _sample_records(split_files(split_dir), max_rows, seed)
  x = np.empty((len(records), len(feature_keys)), dtype=np.float32)
  y = np.empty(len(records), dtype=np.int64)
  for row, record in enumerate(records):
    example = tf.train.Example.FromString(record)
    x[row] = [_scalar(example, key, row) for key in feature_keys]
    y[row] = int(_scalar(example, label_key, row))
  return x, y


def check_schema(schema_path: str, feature_keys, label_key: str) -> None:
  """Checks that the schema knows every feature the model reads and the label.

  Args:
    schema_path: a `schema.pbtxt` written by SchemaGen.
    feature_keys: the model's input columns.
    label_key: the label column.

  Raises:
    UserInputError: naming the columns the schema lacks.
  """
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2

  with open(schema_path) as f:
    schema = text_format.Parse(f.read(), schema_pb2.Schema())
  known = {feature.name for feature in schema.feature}
  missing = [key for key in (*feature_keys, label_key) if key not in known]
  if missing:
    raise UserInputError(
      f"The schema has no column(s) {missing} that input_spec.json names; the model and the "
      "Examples do not belong together."
    )
