"""One model's predictions and labels on TFRecord files of serialized tf.Examples, in batches.

The Evaluator scores its models this way where it computes TFMA's metrics in process, and the
data gate scores the live model on tonight's eval rows. Both feed a model as TFMA does:
serialized Examples to its serving signature, and the label read through its preprocessing
signature when the model spec names it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from components import model_contract
from core import tasks

BATCH_ROWS = 8192


@dataclasses.dataclass
class ModelOutputs:
  """One model's predictions on the eval rows, and the labels as that model sees them."""

  predictions: np.ndarray  # [rows, k] float64
  labels: np.ndarray  # [rows] float64


def record_batches(files: Sequence[str], rows: int = BATCH_ROWS) -> Iterator[Any]:
  """Batches of serialized tf.Examples from the split's (gzipped) TFRecord files."""
  import tensorflow as tf

  compression = "GZIP" if files and files[0].endswith(".gz") else ""
  yield from tf.data.TFRecordDataset(list(files), compression_type=compression).batch(rows)


def model_outputs(
  saved_model_dir: str, spec: Any, files: Sequence[str], conform=None
) -> ModelOutputs:
  """Runs one model over the eval split in batches, as TFMA feeds it: serialized Examples.

  Args:
    saved_model_dir: the model's SavedModel.
    spec: its TFMA ModelSpec.
    files: the eval split's TFRecord files.
    conform: a function giving each batch the column types the model was trained on
      (`conform_lib.conformer`), or None to feed the batches as they are.

  Raises:
    ValueError: when the signature has more than one output or the label cannot be found.
  """
  import tensorflow as tf

  loaded = tf.saved_model.load(saved_model_dir)
  serve = loaded.signatures[spec.signature_name or model_contract.SERVING_SIGNATURE]
  transform = (
    loaded.signatures[model_contract.TRANSFORM_SIGNATURE]
    if model_contract.TRANSFORM_SIGNATURE in spec.preprocessing_function_names
    else None
  )
  input_name = _single_string_input(serve)
  predictions, labels = [], []
  for raw in record_batches(files):
    batch = raw if conform is None else conform(raw)
    outputs = serve(**{input_name: batch})
    if len(outputs) != 1:
      raise ValueError(f"the serving signature has {len(outputs)} outputs; TFMA runs for it")
    [prediction] = outputs.values()
    predictions.append(np.asarray(prediction.numpy(), np.float64).reshape(len(batch), -1))
    labels.append(_labels(batch, spec.label_key, transform))
  return ModelOutputs(np.concatenate(predictions), np.concatenate(labels))


def _single_string_input(signature) -> str:
  import tensorflow as tf

  specs = signature.structured_input_signature[1]
  if len(specs) != 1 or next(iter(specs.values())).dtype != tf.string:
    raise ValueError("the serving signature does not take serialized Examples alone")
  return next(iter(specs))


def _raw_kind(records: Sequence[bytes], key: str) -> str | None:
  """How the first of `records` that holds feature `key` stores it (bytes_list, int64_list or
  float_list); None where none holds it."""
  import tensorflow as tf

  for record in records:
    feature = tf.train.Example.FromString(record).features.feature.get(key)
    if feature is not None and feature.WhichOneof("kind"):
      return feature.WhichOneof("kind")
  return None


def _is_text(kind: str | None) -> bool | None:
  return None if kind is None else kind == "bytes_list"


def signature_outputs(saved_model_dir: str, name: str) -> set[str] | None:
  """The output names of a SavedModel's signature `name`, read from its saved_model.pb without
  loading the model; None where it has no such signature."""
  from tensorflow.core.protobuf import saved_model_pb2
  from tfx.dsl.io import fileio

  saved = saved_model_pb2.SavedModel()
  with fileio.open(f"{saved_model_dir.rstrip('/')}/saved_model.pb", "rb") as f:
    saved.ParseFromString(f.read())
  for graph in saved.meta_graphs:
    if name in graph.signature_def:
      return set(graph.signature_def[name].outputs)
  return None


def check_label(saved_model_dir: str, spec: Any, files: Sequence[str]) -> None:
  """Checks that the model's label can be read as TFMA reads it (`core.tasks.label_view`),
  before TFMA's Beam pipeline would fail on it with a traceback.

  A model read through its `transform_features` signature needs the label among that
  signature's outputs, or as a number in the examples; any other model needs a number label in
  the examples (the pre-flight checks refuse a text one where they can read the data: a
  compiled Kubeflow pipeline's cannot).

  Raises:
    core.tasks.LabelError: naming the fix (--eval-label-key).
  """
  transformed = None
  if model_contract.TRANSFORM_SIGNATURE in spec.preprocessing_function_names:
    transformed = signature_outputs(saved_model_dir, model_contract.TRANSFORM_SIGNATURE)
    if transformed is None:
      # TFMA (and the in-process scoring) would fail on the missing signature in every batch.
      raise tasks.LabelError(
        f"the model has no {model_contract.TRANSFORM_SIGNATURE!r} signature, so the Evaluator "
        f"cannot make label {spec.label_key!r} from the eval examples; export one in the "
        "module's run_fn (TFX's taxi and penguin modules do), or pass a label column the "
        "examples hold as --eval-label-key, or leave it out."
      )
    if spec.label_key in transformed:
      return
  first = next(iter(record_batches(files)), None)
  if first is None:
    return
  kind = _raw_kind(first.numpy(), spec.label_key)
  if transformed is not None or kind == "bytes_list":
    tasks.label_view(spec.label_key, transformed, _is_text(kind))


def raw_labels(files: Sequence[str], label_key: str) -> np.ndarray:
  """The label's values as the examples hold them, in `model_outputs`' row order: a number per
  row (NaN where the row has none, or a value that is not a number). A model's own labels can be
  class indices, which cannot tell a value its training never saw."""
  values = []
  for batch in record_batches(files):
    kind = _raw_kind(batch.numpy(), label_key)
    if kind not in ("int64_list", "float_list"):
      values.append(np.full(len(batch.numpy()), np.nan))
      continue
    values.append(_number_label(batch, label_key, kind).numpy()[:, 0])
  return np.concatenate(values) if values else np.zeros(0)


def _number_label(batch, label_key: str, kind: str | None):
  """The label of serialized examples as float64 [rows, 1], NaN where a row has none."""
  import tensorflow as tf

  dtype = tf.int64 if kind == "int64_list" else tf.float32
  parsed = tf.io.parse_example(batch, {label_key: tf.io.RaggedFeature(dtype)})
  return tf.cast(parsed[label_key], tf.float64).to_tensor(default_value=np.nan, shape=[None, 1])


def _labels(batch, label_key: str, transform) -> np.ndarray:
  import tensorflow as tf

  transformed = None
  if transform is not None:
    [name] = transform.structured_input_signature[1]
    transformed = transform(**{name: batch})
  kind = _raw_kind(batch.numpy(), label_key)
  if tasks.label_view(label_key, transformed, _is_text(kind)) == tasks.TRANSFORMED:
    value = transformed[label_key]
  else:
    value = _number_label(batch, label_key, kind)
  value = tf.cast(value, tf.float64).numpy().reshape(len(batch.numpy()), -1)
  if value.shape[1] != 1:
    raise ValueError(f"label {label_key!r} has {value.shape[1]} values per example")
  return value[:, 0]
