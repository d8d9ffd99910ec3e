"""The OptimizedModel's index, variants.json: written by the Optimizer, read by the Pusher, the
report and the run summary."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import tensorflow as tf

# The output index: one file beside the variant folders, read by the Pusher via read_index().
INDEX_FILE = "variants.json"
INDEX_FORMAT = "tfx-pipeline-kit.optimizer-index/1"
KEY_VARIANTS = "variants"
# The blessed variants' names; the Optimizer also sets them (JSON) as the OptimizedModel's
# custom property of this name, which the run summary reads.
KEY_BLESSED = "blessed_variants"
KEY_BASELINE = "baseline"

# Each variant's status in the index.
STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"


def write_index(output_dir: str, report: dict) -> str:
  """Writes `variants.json` atomically: the one place the Pusher reads (see `read_index`).

  Args:
    output_dir: the OptimizedModel folder holding the variant folders.
    report: the optimize() report.

  Returns:
    The index file's path.
  """
  index = {
    "format": INDEX_FORMAT,
    "task": report.get("task"),
    "preprocessing_included": report.get("preprocessing_included", True),
    KEY_BASELINE: report[KEY_BASELINE],
    KEY_VARIANTS: {e["name"]: e for e in report[KEY_VARIANTS]},
    KEY_BLESSED: report[KEY_BLESSED],
  }
  path = os.path.join(output_dir, INDEX_FILE)
  with tf.io.gfile.GFile(path + ".tmp", "w") as f:
    f.write(json.dumps(index, indent=2))
  tf.io.gfile.rename(path + ".tmp", path, overwrite=True)
  return path


@dataclasses.dataclass(frozen=True)
class BlessedVariant:
  """A variant the Pusher may ship.

  Attributes:
    name: the variant name (its folder under the OptimizedModel uri).
    folder: the variant's folder.
    metrics: what the manifest records about it.
    signature: its signature.json content.
  """

  name: str
  folder: str
  metrics: dict[str, Any]
  signature: dict[str, Any]


def read_index(optimized_model_uri: str) -> tuple[dict[str, Any], list[BlessedVariant]]:
  """Reads an OptimizedModel's index: the whole index and its blessed variants.

  Returns:
    (index, blessed variants); ({}, []) when there is no index (nothing was optimized).

  Raises:
    RuntimeError: when a blessed variant has no folder (a broken artifact).
  """
  path = os.path.join(optimized_model_uri, INDEX_FILE)
  if not tf.io.gfile.exists(path):
    return {}, []
  with tf.io.gfile.GFile(path) as f:
    index = json.loads(f.read())
  blessed = []
  for name in index.get(KEY_BLESSED, []):
    entry = index[KEY_VARIANTS][name]
    folder = os.path.join(optimized_model_uri, name)
    if not tf.io.gfile.exists(folder):
      raise RuntimeError(
        f"the Optimizer's index lists blessed variant {name!r} but {folder} is missing"
      )
    metrics = {
      k: entry[k]
      for k in (
        "runtime",
        "path",
        "metric_value",
        "metric_drop",
        "accuracy",
        "rmse",
        "agreement",
        "size_bytes",
        "gzipped_size_bytes",
        "latency_ms_p50",
        "preprocessing_included",
        "select_tf_ops",
      )
      if k in entry
    }
    blessed.append(BlessedVariant(name, folder, metrics, entry.get("signature", {})))
  return index, blessed
