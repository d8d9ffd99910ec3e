"""The default model's per-epoch metrics, kept in the ModelRun folder for the report page."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from core import sources


def epoch_records(epochs: list[int], history: dict[str, list[Any]]) -> list[dict[str, Any]]:
  """One record per epoch Keras ran: its 0-based number and each logged value."""
  records = []
  for i, epoch in enumerate(epochs):
    record: dict[str, Any] = {"epoch": int(epoch)}
    for name, values in history.items():
      if i < len(values):
        value = float(values[i])
        record[name] = round(value, 6) if math.isfinite(value) else None
    records.append(record)
  return records


def write_history(model_run_dir: str, keras_history: Any) -> str | None:
  """Writes the History of a fit (Keras' `model.history`) into the ModelRun folder.

  Returns:
    The file's path, or None when the fit left no History.
  """
  import tensorflow as tf

  if keras_history is None or not getattr(keras_history, "epoch", None):
    return None
  path = os.path.join(model_run_dir, sources.EPOCH_HISTORY_FILE)
  tf.io.gfile.makedirs(model_run_dir)
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(json.dumps({"epochs": epoch_records(keras_history.epoch, keras_history.history)}))
  return path
