"""Reads the scalars a TensorBoard callback wrote (its event files, one folder per run)."""

from __future__ import annotations

import glob
import os


def scalars(log_dir: str) -> list[tuple[str, str, int, float]]:
  """(run, tag, step, value) of every scalar written under `log_dir`, run by run in order."""
  import tensorflow as tf

  out = []
  for path in sorted(glob.glob(os.path.join(log_dir, "*", "events.out.tfevents.*"))):
    run = os.path.basename(os.path.dirname(path))
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.metadata.plugin_data.plugin_name == "scalars":
          out.append((run, value.tag, event.step, float(tf.make_ndarray(value.tensor))))
  return out
