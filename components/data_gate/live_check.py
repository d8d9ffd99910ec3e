"""The live model on tonight's eval rows: a label that flipped meaning makes it worse than chance.

A label inverted or remapped upstream moves the class shares only when the classes are
unbalanced; on a balanced label the shares stay and the live model is what notices. A model
that beat always answering the most frequent class when it was pushed, and now falls far
below it on tonight's rows, is reading a label that means something else. Natural drift
brings a model down towards that answer, not far below it.

A number label has the same blind spot: a label joined from the wrong rows, or shuffled, keeps
its distribution, which every column check compares. A model that beat always answering the
mean when it was pushed then answers tonight's rows worse than that mean by about the share of
the variance it explained (its predictions spread around a label they no longer follow). So the
check for a number label is R-squared, held to the same margin below 0, with the live model's
mean error on tonight's rows taken out first: a label whose level moved (prices up 10%) is
drift a retrained model follows, and the live model's errors then shift but do not spread.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from components import model_contract
from components.data_gate import report as gate_report
from components.data_gate import thresholds as th
from components.model_scoring import conform_lib, outputs_lib


def accuracy(outputs: outputs_lib.ModelOutputs) -> float | None:
  """The share of rows whose most likely class is their label (None without labelled rows)."""
  keep = ~np.isnan(outputs.labels)
  if not keep.any():
    return None
  scores, labels = outputs.predictions[keep], outputs.labels[keep]
  guess = (scores[:, 0] > 0.5).astype(np.float64) if scores.shape[1] == 1 else scores.argmax(1)
  return float(np.mean(guess == labels))


def r_squared(outputs: outputs_lib.ModelOutputs) -> tuple[float, float] | None:
  """R-squared of a one-output model on the labelled rows, its mean error taken out (1 - the
  variance of its errors over the labels' variance), and its standard error (the delta method
  on the per-row squared errors and squared deviations); None under 2 labelled rows or with
  labels that do not vary."""
  keep = ~np.isnan(outputs.labels)
  if keep.sum() < 2 or outputs.predictions.shape[1] != 1:
    return None
  labels, predicted = outputs.labels[keep], outputs.predictions[keep, 0]
  errors = predicted - labels
  errors = (errors - errors.mean()) ** 2
  spread = (labels - labels.mean()) ** 2
  if not spread.mean() > 0 or not np.isfinite(errors).all():
    return None
  ratio = errors.mean() / spread.mean()
  error = float(np.std(errors - ratio * spread) / math.sqrt(len(labels)) / spread.mean())
  return float(1.0 - ratio), error


def finding(
  saved_model_dir: str,
  files: Sequence[str],
  *,
  label_key: str,
  classification: bool,
  preprocessing: bool,
  tonight_types: Mapping[str, str],
  baseline_types: Mapping[str, str] | None,
  thresholds: th.Thresholds,
  live_version: int | None,
) -> gate_report.Finding | None:
  """A STOP finding when the live model does far worse than the majority answer (or the mean)
  tonight.

  Args:
    saved_model_dir: the live model's SavedModel.
    files: tonight's eval split (TFRecord files).
    label_key: the label column.
    classification: whether the label holds classes (else the check is R-squared).
    preprocessing: whether the model has a `transform_features` signature giving the label as
      it sees it (the kit's default model).
    tonight_types, baseline_types: column types tonight and when the live model was trained
      (the examples are converted to the latter, `conform_lib`).
    thresholds: the gate's thresholds (th.LIVE_MODEL is the margin below the majority answer).
    live_version: the live version's number, for the text.

  Returns:
    The finding, or None when the check passes or cannot be made (no such signature, a text
    label the model does not index).
  """
  import tensorflow_model_analysis as tfma

  margin = thresholds.get(th.LIVE_MODEL)
  if margin is None or not files:
    return None
  spec = tfma.ModelSpec(
    label_key=label_key,
    signature_name=model_contract.SERVING_SIGNATURE,
    preprocessing_function_names=[model_contract.TRANSFORM_SIGNATURE] if preprocessing else [],
  )
  conform = conform_lib.conformer(tonight_types, baseline_types)
  try:
    outputs = outputs_lib.model_outputs(saved_model_dir, spec, files, conform)
  except ValueError:  # Outputs or labels this reader does not cover: no check.
    return None
  live = f"live version {live_version}" if live_version is not None else "the live model"
  if not classification:
    return _regression_finding(outputs, label_key, margin, live)
  correct = accuracy(outputs)
  labels = outputs.labels[~np.isnan(outputs.labels)]
  if correct is None or len(labels) == 0:
    return None
  _, counts = np.unique(labels, return_counts=True)
  majority = float(counts.max() / len(labels))
  noise = 3.0 * math.sqrt(majority * (1 - majority) / len(labels))
  floor = majority - max(margin, noise)
  if correct >= floor:
    return None
  return gate_report.Finding(
    label_key,
    th.LIVE_MODEL,
    gate_report.STOP,
    f"{live} is right on {100 * correct:.1f}% of tonight's {len(labels):,} eval rows, far "
    f"below always answering the most frequent class ({100 * majority:.1f}%; floor "
    f"{100 * floor:.1f}%): the label {label_key!r} looks inverted or remapped",
    correct,
    floor,
  )


def _regression_finding(
  outputs: outputs_lib.ModelOutputs, label_key: str, margin: float, live: str
) -> gate_report.Finding | None:
  measured = r_squared(outputs)
  if measured is None:
    return None
  r2, error = measured
  floor = -max(margin, 3.0 * error)
  if r2 >= floor:
    return None
  rows = int((~np.isnan(outputs.labels)).sum())
  return gate_report.Finding(
    label_key,
    th.LIVE_MODEL,
    gate_report.STOP,
    f"{live} answers tonight's {rows:,} eval rows worse than always answering their mean "
    f"(R-squared {r2:.3f} with its mean error taken out, floor {floor:.3f}): the label "
    f"{label_key!r} looks shuffled, joined from other rows or remapped",
    r2,
    floor,
  )
