"""The Optimizer's index files: each variant's signature.json and the folder's variants.json."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import tensorflow as tf

from components.optimizer import runtime_base
from components.optimizer.run_config import ModelFacts

# The output index: one file beside the variant folders, read by the Pusher via read_index().
INDEX_FILE = "variants.json"
SIGNATURE_FILE = "signature.json"
INDEX_FORMAT = "tfx-pipeline-kit.optimizer-index/1"
SIGNATURE_FORMAT = "tfx-pipeline-kit.variant-signature/1"
KEY_VARIANTS = "variants"
KEY_BLESSED = "blessed_variants"
KEY_BASELINE = "baseline"

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"


def signature_document(
  variant: str, runtime: runtime_base.Runtime, model_file: str, facts: ModelFacts
) -> dict[str, Any]:
  """The input/output contract of one variant, as written to its signature.json.

  It is what a client needs: input names, order, dtypes, shapes, quantization, missing values
  and label classes.

  Args:
    variant: the variant's name.
    runtime: the runtime the variant was measured in; it describes its own inputs and outputs.
    model_file: the file the runtime loads, relative to the variant folder.
    facts: the model's task, label, columns and missing values.

  Returns:
    The signature.json document.
  """
  described = runtime.signature()
  inputs = []
  for position, described_input in enumerate(described.get("inputs", [])):
    entry = dict(described_input)
    entry["position"] = position
    entry["columns"] = facts.columns.get(entry["name"], [entry["name"]])
    if entry["name"] in facts.missing:
      entry["missing_value"] = facts.missing[entry["name"]]
    inputs.append(entry)
  doc = {
    "format": SIGNATURE_FORMAT,
    "variant": variant,
    "runtime": runtime.name,
    "model_file": model_file,
    "inputs": inputs,
    "outputs": described.get("outputs", []),
    "task": facts.task,
    "label": {"key": facts.label_key, "classes": list(facts.classes)},
    "output_meaning": facts.output,
    "preprocessing_included": facts.preprocessing_included,
  }
  if "signature_key" in described:
    doc["signature_key"] = described["signature_key"]
  if not facts.preprocessing_included:
    doc["transform_graph"] = (
      "this variant takes transformed features: run the shipped transform graph "
      "(tft.TFTransformOutput(...).transform_features_layer()) on raw features first"
    )
  return doc


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
