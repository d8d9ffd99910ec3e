"""Writes small Examples artifacts (gzipped tf.Example splits + schema) for tests and benches."""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence

import numpy as np

DIGITS_LABEL = "label"


def load_digits_csv(path: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
  """Reads the digits CSV (pixel_0..pixel_63,label) as int arrays.

  Args:
    path: CSV with a header row.

  Returns:
    (features [n, 64] int64, labels [n] int64, feature names in file order).
  """
  with open(path, newline="") as f:
    reader = csv.reader(f)
    header = next(reader)
    rows = np.array([[int(v) for v in row] for row in reader], dtype=np.int64)
  label_col = header.index(DIGITS_LABEL)
  names = [h for i, h in enumerate(header) if i != label_col]
  return np.delete(rows, label_col, axis=1), rows[:, label_col], names


def write_examples(
  uri: str,
  features: np.ndarray,
  labels: np.ndarray,
  feature_names: Sequence[str],
  *,
  eval_fraction: float = 0.2,
  seed: int = 0,
  label_key: str = DIGITS_LABEL,
) -> dict[str, int]:
  """Writes Split-train/ and Split-eval/ gzipped TFRecords of int64 tf.Examples under uri.

  Args:
    uri: the Examples artifact folder.
    features: [n, k] integer feature matrix.
    labels: [n] integer labels.
    feature_names: k feature names.
    eval_fraction: share of rows in the eval split.
    seed: permutation seed of the split.
    label_key: label feature name.

  Returns:
    Rows written per split.
  """
  import tensorflow as tf

  order = np.random.default_rng(seed).permutation(len(labels))
  n_eval = round(len(labels) * eval_fraction)
  splits = {"eval": order[:n_eval], "train": order[n_eval:]}
  options = tf.io.TFRecordOptions(compression_type="GZIP")
  for split, idx in splits.items():
    folder = os.path.join(uri, f"Split-{split}")
    os.makedirs(folder, exist_ok=True)
    with tf.io.TFRecordWriter(
      os.path.join(folder, "data_tfrecord-00000-of-00001.gz"), options
    ) as w:
      for i in idx:
        feats = {
          name: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(features[i, j])]))
          for j, name in enumerate(feature_names)
        }
        feats[label_key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(labels[i])]))
        w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
  return {split: len(idx) for split, idx in splits.items()}


def write_int_schema(path: str, names: Sequence[str]) -> str:
  """Writes a schema.pbtxt declaring each name as a required scalar INT feature.

  Args:
    path: the schema.pbtxt path (its folder is created).
    names: feature names, label included.

  Returns:
    The path.
  """
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2

  schema = schema_pb2.Schema()
  for name in names:
    feature = schema.feature.add(name=name, type=schema_pb2.INT)
    feature.presence.min_fraction = 1.0
    feature.presence.min_count = 1
    feature.shape.dim.add(size=1)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    f.write(text_format.MessageToString(schema))
  return path


def trainer_artifacts(root: str, csv_path: str, eval_fraction: float = 0.2):
  """Writes digits Examples + Schema under root and returns the Trainer's artifact dicts.

  Args:
    root: empty folder for examples/, schema/, model/ and model_run/.
    csv_path: digits CSV.
    eval_fraction: share of rows in the eval split.

  Returns:
    (input_dict, output_dict) keyed by the stock Trainer spec keys.
  """
  from tfx.types import artifact_utils, standard_artifacts, standard_component_specs

  features, labels, names = load_digits_csv(csv_path)
  examples = standard_artifacts.Examples()
  examples.uri = os.path.join(root, "examples")
  examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
  write_examples(examples.uri, features, labels, names, eval_fraction=eval_fraction)
  schema = standard_artifacts.Schema()
  schema.uri = os.path.join(root, "schema")
  write_int_schema(os.path.join(schema.uri, "schema.pbtxt"), [*names, DIGITS_LABEL])
  model = standard_artifacts.Model()
  model.uri = os.path.join(root, "model")
  model_run = standard_artifacts.ModelRun()
  model_run.uri = os.path.join(root, "model_run")
  inputs = {
    standard_component_specs.EXAMPLES_KEY: [examples],
    standard_component_specs.SCHEMA_KEY: [schema],
  }
  outputs = {
    standard_component_specs.MODEL_KEY: [model],
    standard_component_specs.MODEL_RUN_KEY: [model_run],
  }
  return inputs, outputs
