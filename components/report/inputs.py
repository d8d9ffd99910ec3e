"""Reads what a run left into plain values for the report page.

run_summary.json points at the artifacts (`sources`); each reader here takes a folder or a
file and returns dicts and lists, and returns an empty value where the artifact is absent or
unreadable: a page of a failed run shows what there is.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from core import properties, sources, splits

_LOG = logging.getLogger(__name__)
# Quarantined rows the page lists (the file has all of them).
FIRST_BAD_ROWS = 5
# Values a text column's top list shows.
TOP_VALUES = 5


@dataclasses.dataclass
class Column:
  """One column of one split, as the page shows it."""

  name: str
  type: str
  rows: int
  missing: float  # share of rows without a value
  distinct: int | None  # text columns (TFDV counts no distinct numbers)
  mean: float | None = None
  low: float | None = None
  high: float | None = None
  edges: list[float] = dataclasses.field(default_factory=list)  # numeric histogram
  counts: list[float] = dataclasses.field(default_factory=list)
  top: list[tuple[str, float]] = dataclasses.field(default_factory=list)  # text: value, count


def artifact(summary: Mapping[str, Any], role: str) -> dict[str, Any]:
  """The pointer run_summary.json holds for one role ({"uri", "properties"}), or {}."""
  return dict((summary.get(sources.ARTIFACTS) or {}).get(role) or {})


def _fileio():
  from tfx.dsl.io import fileio

  return fileio


def statistics(uri: str | None) -> dict[str, dict[str, Column]]:
  """Split -> column -> Column from an ExampleStatistics folder (Split-*/FeatureStats.pb)."""
  if not uri:
    return {}
  out = {}
  fileio = _fileio()
  try:
    entries = sorted(fileio.listdir(uri)) if fileio.isdir(uri) else []
  except OSError:
    return {}
  for entry in entries:
    name = entry.rstrip("/")
    import tensorflow_data_validation as tfdv
    from tfx.components.statistics_gen import executor as stats_executor

    path = os.path.join(uri, name, stats_executor.DEFAULT_FILE_NAME)
    split = splits.split_of_folder(name)
    if split is None or not fileio.exists(path):
      continue

    stats = tfdv.load_stats_binary(path)
    if stats.datasets:
      out[split] = columns(stats.datasets[0])
  return out


def columns(dataset) -> dict[str, Column]:
  """The columns of one DatasetFeatureStatistics proto (tensorflow_metadata), by name."""
  from tensorflow_metadata.proto.v0 import statistics_pb2

  kinds = statistics_pb2.FeatureNameStatistics
  type_names = {kinds.INT: "int", kinds.FLOAT: "float", kinds.STRING: "text", kinds.BYTES: "bytes"}
  rows = int(dataset.num_examples)
  out = {}
  for feature in dataset.features:
    name = ".".join(feature.path.step) if feature.HasField("path") else feature.name
    kind = type_names.get(feature.type, "other")
    if feature.WhichOneof("stats") == "num_stats":
      num = feature.num_stats
      present = rows - int(num.common_stats.num_missing)
      col = Column(name, kind, rows, _share(rows - present, rows), None, num.mean, num.min, num.max)
      standard = [h for h in num.histograms if h.type == h.STANDARD]
      if standard and standard[0].buckets and present:
        buckets = standard[0].buckets
        col.edges = [b.low_value for b in buckets] + [buckets[-1].high_value]
        col.counts = [b.sample_count for b in buckets]
    elif feature.WhichOneof("stats") == "string_stats":
      text = feature.string_stats
      missing = int(text.common_stats.num_missing)
      col = Column(name, kind, rows, _share(missing, rows), int(text.unique))
      col.top = [(v.value, v.frequency) for v in text.top_values[:TOP_VALUES]]
    else:
      continue
    out[name] = col
  return out


def _share(part: float, whole: float) -> float:
  return float(part) / whole if whole else 0.0


def quarantine(examples: Mapping[str, Any]) -> dict[str, Any]:
  """The quarantined rows of the Examples: their count and the first few with their reasons."""
  props = examples.get("properties") or {}
  found = {
    "count": props.get(properties.EXAMPLES_BAD_ROWS),
    "unlabeled": props.get(properties.EXAMPLES_UNLABELED_ROWS),
    "tokens": json.loads(props.get(properties.EXAMPLES_UNLABELED_TOKENS) or "{}"),
    "first": [],
  }
  path = props.get(properties.EXAMPLES_QUARANTINE)
  if not path:
    return found
  try:
    with _fileio().open(path, "r") as f:
      head = "".join(line for _, line in zip(range(4 * FIRST_BAD_ROWS + 1), f, strict=False))
  except OSError as e:
    _LOG.warning("report: cannot read the quarantine file %s: %s", path, e)
    return found
  for row in list(csv.DictReader(io.StringIO(head)))[:FIRST_BAD_ROWS]:
    found["first"].append(
      {"line": row.get("line"), "reason": row.get("reason"), "row": row.get("row")}
    )
  found["file"] = path
  return found


def epoch_history(model_run_uri: str | None) -> list[dict[str, Any]]:
  """The metrics per epoch a model module left in its ModelRun folder, oldest first ([] when
  it left none: `sources.EPOCH_HISTORY_FILE`)."""
  if not model_run_uri:
    return []
  path = os.path.join(model_run_uri, sources.EPOCH_HISTORY_FILE)
  fileio = _fileio()
  try:
    if not fileio.exists(path):
      return []
    with fileio.open(path, "r") as f:
      return list(json.loads(f.read()).get("epochs") or [])
  except (OSError, ValueError, AttributeError) as e:
    _LOG.warning("report: cannot read %s: %s", path, e)
    return []


def evaluation(found: Mapping[str, Any]) -> dict[str, Any]:
  """The candidate's and the live model's metrics in an evaluation folder, and how the
  candidate's predictions fell (a property of the ModelEvaluation):
  {"metrics": {candidate, baseline, diff_vs_baseline}, "predictions"}."""
  from components.artifact_files import evaluation_metrics

  uri = found.get("uri")
  predictions = (found.get("properties") or {}).get(properties.PREDICTIONS_PROPERTY)
  return {
    "metrics": evaluation_metrics.read_overall_metrics(uri) if uri else {},
    "predictions": json.loads(predictions) if predictions else None,
  }


def variants(summary: Mapping[str, Any]) -> dict[str, Any] | None:
  """The Optimizer's report (baseline and variants): run_summary.json's copy, else the
  variants.json index of the OptimizedModel."""
  if summary.get("optimizer"):
    return dict(summary["optimizer"])
  uri = artifact(summary, sources.OPTIMIZED_MODEL).get("uri")
  if not uri:
    return None
  from components.artifact_files import variant_index

  try:
    index, _ = variant_index.read_index(uri)
  except (OSError, ValueError, RuntimeError) as e:
    _LOG.warning("report: cannot read the Optimizer's index under %s: %s", uri, e)
    return None
  return index


def pushed_version(summary: Mapping[str, Any]) -> dict[str, Any]:
  """The pushed version's manifest and model contract ({} and None where nothing was pushed)."""
  pushed = summary.get("pushed") or {}
  if not pushed.get("pushed") or not pushed.get("path"):
    return {"manifest": {}, "contract": None}
  from components import model_contract
  from components.serving import manifest

  path = pushed["path"]
  try:
    contract = model_contract.read_contract(path)
  except (OSError, ValueError, KeyError) as e:
    _LOG.warning("report: cannot read the model contract under %s: %s", path, e)
    contract = None
  return {"manifest": manifest.safe_manifest(path), "contract": contract}


def gate(summary: Mapping[str, Any]) -> dict[str, Any]:
  """The data gate's report: the night's copy, else the DataGate's result file."""
  night = summary.get("night") or {}
  if night.get("gate"):
    return dict(night["gate"])

  uri = artifact(summary, sources.GATE).get("uri")
  path = os.path.join(uri, properties.GATE_REPORT_FILE) if uri else None
  if not path or not _fileio().exists(path):
    return {}
  with _fileio().open(path, "r") as f:
    return json.loads(f.read())
