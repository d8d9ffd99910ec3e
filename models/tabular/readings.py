"""A count label read two ways: as classes and as a quantity, trained together, the better kept.

A label of whole numbers from 0 up (`core.tasks.reads_both`) can be a code (the digits 0..9,
where a right class is a right value) or a count (visits to a doctor, the weeks a spell of
unemployment lasted), where a regression on the value often errs less than the expected value
of K classes. The rule cannot tell them apart from the values alone, so the default model
trains both: every network's head gets one unit per class and one more for the quantity
(`layers.BothReadings`), and the loss is the classes' cross-entropy plus the quantity's squared
error in units of the label's standard deviation, so both readings share one trunk and one pass
over the data. After training, the held-out rows (the slice early stopping scores) decide: the
root mean squared error of the classes' expected value against that of the quantity. The model
exported keeps the winner's output only (`layers.KeptReading`), so it serves what a multiclass
or a regression model serves, and its contract says which.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from core import column_types, floors, tasks
from models.tabular import layers, mix
from models.tabular.profile import Profile


def applies(profile: Profile, requested: str, decided_before: bool) -> bool:
  """Whether the run trains both readings of its label (`tasks.reads_both`).

  Args:
    profile: the training data's profile (its label's classes and storage).
    requested: the task the trainer was given (tasks.AUTO when run on its own).
    decided_before: the pipeline decided before the run that the label is read both ways.
  """
  label = profile.label
  kind = column_types.STORED_TO_CSV.get(profile.label_dtype)
  asked = tasks.AUTO if decided_before else requested
  return tasks.reads_both(kind, label.classes, len(label.classes), asked, label.task)


def _values(profile: Profile) -> np.ndarray:
  return np.asarray([float(c) for c in profile.label.classes], dtype=np.float32)


def loss_and_metric(profile: Profile) -> tuple[Any, Any]:
  """The training loss of both readings, and the classes' accuracy (named 'accuracy').

  Targets are class indices (`model_contract.label_target`); a row whose label is outside the
  classes (index -1) adds nothing to the quantity's error.
  """
  import tensorflow as tf

  classes = len(profile.label.classes)
  values = tf.constant(_values(profile))
  scale = 1.0 / profile.label_std
  cross_entropy = tf.keras.losses.SparseCategoricalCrossentropy(reduction="none")

  def loss(y_true, y_pred):
    index = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
    known = index >= 0
    probabilities, quantity = y_pred[:, :classes], y_pred[:, classes]
    value = tf.gather(values, tf.maximum(index, 0))
    error = tf.where(known, (quantity - value) * scale, tf.zeros_like(quantity))
    return cross_entropy(tf.maximum(index, 0), probabilities) + tf.square(error)

  def accuracy(y_true, y_pred):
    return tf.keras.metrics.sparse_categorical_accuracy(y_true, y_pred[:, :classes])

  return loss, accuracy


def held_out_loss(profile: Profile):
  """mix.py's loss of both readings on held-out outputs: the log loss of the classes plus the
  quantity's squared error in units of the label's standard deviation."""
  classes = len(profile.label.classes)
  values = _values(profile).astype(np.float64)

  def loss(predicted: np.ndarray, target: np.ndarray) -> float:
    index = target.reshape(-1).astype(np.int64)
    log_loss = mix.task_loss(tasks.MULTICLASS, predicted[:, :classes], target)
    error = (predicted[:, classes] - values[index]) / profile.label_std
    return log_loss + float(np.mean(np.square(error)))

  return loss


def errors(outputs: np.ndarray, target: np.ndarray, profile: Profile) -> tasks.Readings:
  """Both readings' root mean squared errors on held-out rows.

  Args:
    outputs: the model's [rows, classes + 1] outputs (`layers.BothReadings`).
    target: the rows' class indices (-1: a label outside the classes, left out).
    profile: the profile the model was built from.

  Raises:
    ValueError: when no row has a label among the classes.
  """
  classes = len(profile.label.classes)
  values = _values(profile).astype(np.float64)
  index = np.asarray(target).reshape(-1).astype(np.int64)
  known = index >= 0
  if not known.any():
    raise ValueError("no held-out row has a label among the classes")
  out = np.asarray(outputs, dtype=np.float64)[known]
  truth = values[index[known]]
  classes_rmse = floors.expected_value_rmse(out[:, :classes], values, truth)
  quantity_rmse = float(np.sqrt(np.mean(np.square(out[:, classes] - truth))))
  return tasks.Readings(classes_rmse, quantity_rmse, int(known.sum()))


def kept_profile(profile: Profile, result: tasks.Readings) -> Profile:
  """The profile of the model that serves the winning reading: a quantity's label reads as a
  regression (no classes)."""
  label = tasks.label_info(profile.label.key, result.task, profile.label.classes)
  return dataclasses.replace(profile, label=label, readings=False)


def kept_model(model, profile: Profile, result: tasks.Readings):
  """The model that serves the winning reading only, sharing every layer with `model`."""
  import tensorflow as tf

  quantity = result.winner == tasks.QUANTITY_READING
  output = layers.KeptReading(
    len(profile.label.classes), quantity, dtype="float32", name=f"{result.winner}_reading"
  )(model.output)
  return tf.keras.Model(inputs=model.inputs, outputs=output, name=model.name)
