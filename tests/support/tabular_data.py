"""Small generated tabular data for tests: rows, gzipped tf.Example splits, a schema, and arrays."""

from __future__ import annotations

import math
import os
import pathlib
from collections.abc import Sequence

import numpy as np

# Columns of the generated data: numbers on very different scales (one with gaps), a text
# column that carries signal (with gaps) and a text column of noise with many rare values.
NUMERIC = ("age", "income", "ratio")
TEXT = ("city", "color")
COLORS = ("blue", "green", "red")
LABEL = "label"
# A whole-number label from 0 up that reads best as a quantity (models/tabular/readings.py).
COUNT = "count"
CLASSES = {"binary": ("no", "yes"), "multiclass": ("high", "low", "mid")}


def make_rows(n: int, task: str, seed: int = 0) -> list[dict]:
  """Rows as dicts; None marks an empty cell. The label is learnable from the columns.

  Args:
    n: rows.
    task: 'binary', 'multiclass' or 'regression' (text labels for the first two), or COUNT.
    seed: generator seed.
  """
  rng = np.random.default_rng(seed)
  rows = []
  for _ in range(n):
    age = int(rng.integers(18, 90))
    income = float(rng.uniform(1e4, 6e4))
    ratio = float(rng.uniform(0, 1))
    color = COLORS[int(rng.integers(0, 3))]
    score = (income - 3.5e4) / 1.5e4 + (1.5 if color == "red" else -0.5) + (age - 50) / 40
    row = {
      "age": age,
      "income": None if rng.random() < 0.1 else income,
      "ratio": ratio,
      "color": None if rng.random() < 0.1 else color,
      "city": f"city{int(rng.integers(0, 40))}",
    }
    if task == "regression":
      row[LABEL] = round(10.0 * score + 3.0 * ratio + float(rng.normal(0, 0.3)), 4)
    elif task == COUNT:
      # Events counted over a spell: Poisson, whose mean rises with one column, capped at 19.
      row[LABEL] = int(min(rng.poisson(1 + 8 * ratio), 19))
    elif task == "binary":
      row[LABEL] = "yes" if score > 0 else "no"
    else:
      row[LABEL] = "high" if score > 0.8 else ("low" if score < -0.8 else "mid")
    rows.append(row)
  return rows


def _feature(value, kind: str):
  import tensorflow as tf

  # A missing cell is an empty list of the column's type, as the stock CsvExampleGen writes it.
  if kind == "int":
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[] if value is None else [value]))
  if kind == "float":
    return tf.train.Feature(float_list=tf.train.FloatList(value=[] if value is None else [value]))
  data = [] if value is None else [str(value).encode()]
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=data))


def kinds(task: str) -> dict[str, str]:
  """Column -> 'int', 'float' or 'string', label included."""
  out = {"age": "int", "income": "float", "ratio": "float", "city": "string", "color": "string"}
  out[LABEL] = {"regression": "float", COUNT: "int"}.get(task, "string")
  return out


def serialize(rows: Sequence[dict], task: str) -> list[bytes]:
  """Serialized tf.Examples of rows."""
  import tensorflow as tf

  column_kinds = kinds(task)
  out = []
  for row in rows:
    feature = {k: _feature(row[k], column_kinds[k]) for k in column_kinds}
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    out.append(example.SerializeToString())
  return out


def write_split(folder: str, rows: Sequence[dict], task: str, files: int = 1) -> list[str]:
  """Writes rows as gzipped TFRecord shards under folder; returns the file paths."""
  import tensorflow as tf

  os.makedirs(folder, exist_ok=True)
  records = serialize(rows, task)
  options = tf.io.TFRecordOptions(compression_type="GZIP")
  paths = []
  for shard in range(files):
    path = os.path.join(folder, f"data_tfrecord-{shard:05d}-of-{files:05d}.gz")
    with tf.io.TFRecordWriter(path, options) as writer:
      for record in records[shard::files]:
        writer.write(record)
    paths.append(path)
  return paths


def write_copies(
  split_folder: str, rows: Sequence[dict], task: str, files: int = 1, batch_rows: int = 64
) -> list[str]:
  """Writes the columnar copy of `write_split`'s shards (components/columnar.py), in record
  batches of `batch_rows`; returns the copy's paths."""
  import pyarrow as pa

  from components import columnar
  from components.example_gen import io_lib

  types = {"int": pa.int64(), "float": pa.float32(), "string": pa.binary()}
  paths = []
  for shard in range(files):
    shard_rows = rows[shard::files]
    shard_path = os.path.join(split_folder, f"data_tfrecord-{shard:05d}-of-{files:05d}.gz")
    path = columnar.file_for(shard_path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    writer = columnar.Writer(io_lib.open_write, path)
    for start in range(0, len(shard_rows), batch_rows):
      part = shard_rows[start : start + batch_rows]
      writer.write(
        columnar.flat_batch(
          [
            (name, pa.array([r[name] for r in part], type=types[kind]))
            for name, kind in kinds(task).items()
          ]
        )
      )
    writer.close()
    paths.append(path)
  return paths


def write_schema(path: str, task: str) -> str:
  """Writes a schema.pbtxt typing every column (INT, FLOAT, BYTES); returns its path."""
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2

  types = {"int": schema_pb2.INT, "float": schema_pb2.FLOAT, "string": schema_pb2.BYTES}
  schema = schema_pb2.Schema()
  for name, kind in kinds(task).items():
    schema.feature.add(name=name, type=types[kind])
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    f.write(text_format.MessageToString(schema))
  return path


def write_examples(root: str, task: str, train_rows: int = 600, eval_rows: int = 200) -> dict:
  """Writes examples/Split-{train,eval} and schema/schema.pbtxt under root.

  Returns:
    {"examples": uri, "schema": schema.pbtxt path, "train": rows, "eval": rows}.
  """
  train = make_rows(train_rows, task, seed=1)
  evals = make_rows(eval_rows, task, seed=2)
  examples = os.path.join(root, "examples")
  write_split(os.path.join(examples, "Split-train"), train, task, files=2)
  write_split(os.path.join(examples, "Split-eval"), evals, task)
  schema = write_schema(os.path.join(root, "schema", "schema.pbtxt"), task)
  return {"examples": examples, "schema": schema, "train": train, "eval": evals}


def model_inputs(rows: Sequence[dict], text: Sequence[str] = ("color",)) -> dict[str, np.ndarray]:
  """The inputs of a model laid out as the contract says: `numeric` [n, 3] float32 in NUMERIC
  order with NaN for gaps, and `text_<column>` [n, 1] bytes with b'' for gaps."""
  numeric = np.array(
    [[math.nan if r[c] is None else float(r[c]) for c in NUMERIC] for r in rows], np.float32
  )
  out = {"numeric": numeric}
  for column in text:
    values = [b"" if r[column] is None else r[column].encode() for r in rows]
    out[f"text_{column}"] = np.array(values, dtype=object).reshape(-1, 1)
  return out


def label_targets(rows: Sequence[dict], task: str) -> np.ndarray:
  """Labels as a model is trained against them: class indices, or the values."""
  if task == "regression":
    return np.array([r[LABEL] for r in rows], np.float32)
  classes = CLASSES[task]
  return np.array([classes.index(r[LABEL]) for r in rows], np.int64)


IRIS_FEATURES = ("sepal_length", "sepal_width", "petal_length", "petal_width")


def write_iris_csv(folder: pathlib.Path) -> pathlib.Path:
  """scikit-learn's iris table as `folder/iris.csv` (4 number columns and a text `species`)."""
  from sklearn.datasets import load_iris

  iris = load_iris()
  folder.mkdir(parents=True, exist_ok=True)
  lines = [",".join([*IRIS_FEATURES, "species"])]
  lines += [
    ",".join([*(f"{v:.2f}" for v in x), iris.target_names[y]])
    for x, y in zip(iris.data, iris.target, strict=True)
  ]
  path = folder / "iris.csv"
  path.write_text("\n".join(lines) + "\n")
  return path
