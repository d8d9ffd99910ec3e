"""The data gate: tonight's data against the data the live version was trained on.

Plain values in, a `report.GateReport` out; no TFX types, so every check is tested on its own.
TFDV does the comparisons it has: `tfdv.validate_statistics` with the live version's schema,
drift comparators on every column it reads (Jensen-Shannon divergence over quantile buckets for
numbers, L-infinity distance for text), the share of values outside a text column's known
values, and the row count's drift. The statistics add what TFDV does not compare between two
datasets: a column emptied, a rise in empty cells, a number column rescaled (a unit change
keeps its shape, which a divergence over quantiles misses when the factor is small), and the
label's class shares. Each column's own checks are in `column_checks`; the row count, spans
delivered again and the label's classes are here.

Each finding stops the night, or is information: a compatible change (a column that was empty
and now has values, whole numbers that now have decimals, a new column), or drift in a column
the live model does not read, or in a date or time stamp, which moves with every night.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from components import model_contract
from components.data_gate import bands, column_checks, shape_check
from components.data_gate import report as rp
from components.data_gate import stats_view as sv
from components.data_gate import thresholds as th
from core import missing_values
from core.column_types import SCHEMA_FLOAT, SCHEMA_INT

# The check of `_repeated_findings`.
REPEATED = "repeated"


# ----------------------------------------------------------------------------- the gate


@dataclasses.dataclass(frozen=True)
class Night:
  """One side of the comparison: a night's training statistics, schema and label counts.

  Attributes:
    statistics: the train split's DatasetFeatureStatistics.
    schema: the Schema inferred from it (the live version's: the one it was trained on).
    label_counts: the label's value counts on the train split (None: not counted, or a
      number label).
    span_digests: str(span) -> {"rows", "digest"} of each span read (the Examples'
      `span_digests`; None: not recorded).
  """

  statistics: Any
  schema: Any
  label_counts: Mapping[str, int] | None = None
  span_digests: Mapping[str, Mapping[str, Any]] | None = None


def evaluate(
  tonight: Night,
  reference: Night,
  *,
  live_version: int | None,
  label_key: str,
  classification: bool,
  read_columns: Iterable[str] | None,
  thresholds: th.Thresholds,
  accepted: Sequence[str] = (),
  history: Sequence[Mapping[str, Any] | None] = (),
  earlier: Mapping[int, Mapping[str, Any]] | None = None,
) -> rp.GateReport:
  """Compares tonight's training data with the live version's.

  Args:
    tonight: tonight's night.
    reference: the live version's night.
    live_version: its number, for the report.
    label_key: the label column.
    classification: whether the label holds classes (its class shares are compared).
    read_columns: the columns the live model reads (None: every column); drift elsewhere
      is information.
    thresholds: the gate's thresholds.
    accepted: names whose stopping findings are let through (`th.is_accepted`).
    history: the gate reports of past nights, oldest first (the nights log's `gate`); each
      column's drift is held to its band over the normal ones (`bands`).

  Returns:
    The report; `passed` is False when a finding stops the night.
  """
  now, ref = sv.column_stats(tonight.statistics), sv.column_stats(reference.statistics)
  now_types = model_contract.schema_types(tonight.schema)
  ref_types = model_contract.schema_types(reference.schema)
  read = None if read_columns is None else {*read_columns, label_key}
  findings: list[rp.Finding] = []
  compared: dict[str, Mapping[str, Any]] = {}
  anomalies = _tfdv_anomalies(tonight.statistics, reference, thresholds, ref)
  anomalies.failing |= bands.apply(anomalies.drift, bands.normal_history(history), thresholds)
  for name in sorted(set(ref) | set(now)):
    found = column_checks.column_findings(
      name,
      now.get(name),
      ref.get(name),
      now_types,
      ref_types,
      anomalies.reasons.get(name, set()),
      anomalies.descriptions.get(name, ""),
      thresholds,
    )
    findings += _with_shape(name, now, ref, now_types, ref_types, found, thresholds, read)
    measured = anomalies.drift.get(name)
    if measured:
      compared[name] = measured
  findings += column_checks.drift_findings(
    anomalies.drift, now, ref, thresholds, read, anomalies.failing
  )
  findings += _dataset_findings(tonight, reference, anomalies, thresholds)
  findings += _repeated_findings(tonight, reference, live_version, earlier or {})
  if classification:
    findings += _label_findings(tonight, reference, label_key, thresholds)
  findings = sorted((rp.mark(f, accepted) for f in findings), key=rp.order_key)
  rows = {
    "tonight": int(tonight.statistics.num_examples),
    "reference": int(reference.statistics.num_examples),
  }
  return rp.GateReport(
    live_version, tuple(findings), compared, rows, tuple(accepted), anomalies=anomalies.proto
  )


def _with_shape(
  name: str,
  now: Mapping[str, sv.ColumnStats],
  ref: Mapping[str, sv.ColumnStats],
  now_types: Mapping[str, str],
  ref_types: Mapping[str, str],
  found: list[rp.Finding],
  thresholds: th.Thresholds,
  read: set[str] | None,
) -> list[rp.Finding]:
  """The column's own findings, with a number column that looks like the reference after an
  offset, a scale with an offset or a periodic shift (`shape_check`). Such a change replaces a
  unit change the scale check saw (an offset moves the median and the mean too, and a heavy
  tail the spread: the offset is the better name); a pure scale change stays the scale
  check's, and so is a unit change that made whole numbers of decimals or back (fare in cents).
  A pure scale under the scale bound (x 1.8 + 32 on values in the tens of thousands) is named
  here unless the scale check's bound was set (for the column or all, or off): then pure scales
  are its alone. An emptied column has no shape to compare."""
  numbers = (SCHEMA_INT, SCHEMA_FLOAT)
  tonight, before = now.get(name), ref.get(name)
  if tonight is None or before is None or not tonight.values or not before.values:
    return found
  types = (now_types.get(name, tonight.type), ref_types.get(name, before.type))
  if any(t not in numbers for t in types) or any(f.check == rp.EMPTIED for f in found):
    return found
  change = shape_check.detect(name, tonight, before, thresholds)
  scaled = [f for f in found if f.check == th.SCALE]
  retyped = any(f.check == rp.TYPE for f in found)
  if change is None or (scaled and (change.kind == shape_check.SCALE or retyped)):
    return found
  if change.kind == shape_check.SCALE and thresholds.is_set(th.SCALE, name):
    return found
  kept = [f for f in found if f.check != th.SCALE]
  return [*kept, shape_check.finding(name, change, thresholds, read)]


# ----------------------------------------------------------------------------- TFDV


@dataclasses.dataclass
class _Anomalies:
  """What TFDV reported: drift measurements, failing checks and reasons, by column."""

  drift: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
  failing: set[str] = dataclasses.field(default_factory=set)  # columns above their drift bound
  reasons: dict[str, set[str]] = dataclasses.field(default_factory=dict)
  dataset: set[str] = dataclasses.field(default_factory=set)
  descriptions: dict[str, str] = dataclasses.field(default_factory=dict)
  proto: Any = None


def comparison_schema(
  reference: Night, thresholds: th.Thresholds, ref: Mapping[str, sv.ColumnStats]
):
  """The live version's schema with the gate's comparators, as TFDV validates against it.

  Presence, shape and value-count constraints are dropped (the gate reads empty cells from the
  statistics instead: an empty cell is not a missing column). Every column with values gets a
  drift comparator at its threshold; a text column with a domain gets its minimum domain mass
  (1 - the new_values threshold); the row count gets a drift comparator.
  """
  from tensorflow_metadata.proto.v0 import schema_pb2

  schema = schema_pb2.Schema()
  schema.CopyFrom(reference.schema)
  for feature in schema.feature:
    stats = ref.get(feature.name)
    has_values = stats is not None and stats.values > 0
    feature.ClearField("shape")
    feature.ClearField("value_count")
    feature.presence.Clear()
    feature.presence.min_count = 1 if has_values else 0
    feature.ClearField("drift_comparator")
    feature.ClearField("distribution_constraints")
    drift = thresholds.get(th.DRIFT, feature.name, text=feature.type == schema_pb2.BYTES)
    if has_values and drift is not None:
      if feature.type == schema_pb2.BYTES:
        feature.drift_comparator.infinity_norm.threshold = drift
      else:
        jsd = feature.drift_comparator.jensen_shannon_divergence
        jsd.threshold = drift
        jsd.source.type = schema_pb2.HistogramSelection.QUANTILES
    new_values = thresholds.get(th.NEW_VALUES, feature.name)
    if feature.HasField("domain") or feature.HasField("string_domain"):
      if new_values is None:
        feature.ClearField("domain")
        feature.ClearField("string_domain")
      else:
        feature.distribution_constraints.min_domain_mass = max(0.0, 1.0 - new_values)
  low, high = thresholds.get(th.ROWS), thresholds.get(th.MAX_ROWS)
  schema.dataset_constraints.Clear()
  if low is not None or high is not None:
    comparator = schema.dataset_constraints.num_examples_drift_comparator
    if low is not None:
      comparator.min_fraction_threshold = low
    if high is not None:
      comparator.max_fraction_threshold = high
  return schema


def _tfdv_anomalies(
  statistics, reference: Night, thresholds: th.Thresholds, ref: Mapping[str, sv.ColumnStats]
) -> _Anomalies:
  import tensorflow_data_validation as tfdv
  from tensorflow_metadata.proto.v0 import anomalies_pb2, statistics_pb2

  def as_list(dataset):
    out = statistics_pb2.DatasetFeatureStatisticsList()
    out.datasets.add().CopyFrom(dataset)
    return out

  result = tfdv.validate_statistics(
    as_list(statistics),
    comparison_schema(reference, thresholds, ref),
    previous_statistics=as_list(reference.statistics),
  )
  found = _Anomalies(proto=result)
  kinds = anomalies_pb2.DriftSkewInfo.Measurement.Type
  for info in result.drift_skew_info:
    name = ".".join(info.path.step)
    for m in info.drift_measurements:
      statistic = {
        kinds.L_INFTY: "L-infinity distance",
        kinds.JENSEN_SHANNON_DIVERGENCE: ("Jensen-Shannon divergence"),
      }.get(m.type)
      if statistic:
        found.drift[name] = {"statistic": statistic, "value": m.value, "threshold": m.threshold}
  types = anomalies_pb2.AnomalyInfo.Type
  for name, info in result.anomaly_info.items():
    reasons = {types.Name(r.type) for r in info.reason}
    found.reasons[name] = reasons
    found.descriptions[name] = info.description
    if reasons & {"COMPARATOR_L_INFTY_HIGH", "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH"}:
      found.failing.add(name)
  if result.HasField("dataset_anomaly_info"):
    found.dataset = {types.Name(r.type) for r in result.dataset_anomaly_info.reason}
  return found


# ----------------------------------------------------------------------------- dataset, label


def _dataset_findings(
  tonight: Night,
  reference: Night,
  anomalies: _Anomalies,
  thresholds: th.Thresholds,
) -> list[rp.Finding]:
  now, ref = int(tonight.statistics.num_examples), int(reference.statistics.num_examples)
  out = []
  if "COMPARATOR_LOW_NUM_EXAMPLES" in anomalies.dataset:
    bound = thresholds.get(th.ROWS)
    out.append(
      rp.Finding(
        th.ROW_COUNT,
        th.ROWS,
        rp.STOP,
        f"tonight has {now:,} training rows, {now / max(ref, 1):.2f} of the live version's "
        f"{ref:,} (< {bound:g})",
        now / max(ref, 1),
        bound,
      )
    )
  if "COMPARATOR_HIGH_NUM_EXAMPLES" in anomalies.dataset:
    bound = thresholds.get(th.MAX_ROWS)
    out.append(
      rp.Finding(
        th.ROW_COUNT,
        th.ROWS,
        rp.STOP,
        f"tonight has {now:,} training rows, {now / max(ref, 1):.2f} times the live version's "
        f"{ref:,} (> {bound:g})",
        now / max(ref, 1),
        bound,
      )
    )
  return out


def _repeated_findings(
  tonight: Night,
  reference: Night,
  live_version: int | None,
  earlier: Mapping[int, Mapping[str, Any]],
) -> list[rp.Finding]:
  """A span new tonight whose rows are those of a span the live version, or an earlier version
  still kept (`earlier`: version -> its span digests), was trained on: a feed that delivers old
  data again (an export that did not run, a copy of last month's file) under a new span.
  Training on it pushes a model of old data as if it were new."""
  now, ref = tonight.span_digests or {}, reference.span_digests or {}
  live = f"live version {live_version}" if live_version is not None else "the live version"
  seen = {}
  for version, digests in sorted(earlier.items()):
    for span, d in (digests or {}).items():
      seen[(d.get("rows"), d.get("digest"))] = (span, f"version {version}")
  seen.update({(d.get("rows"), d.get("digest")): (span, live) for span, d in ref.items()})
  out = []
  for span, d in sorted(now.items(), key=lambda item: int(item[0])):
    same, which = seen.get((d.get("rows"), d.get("digest")), (None, live))
    # The same span read again (a rerun, a retrain with other settings) is no repeat.
    if span in ref or same is None or str(same) == str(span) or not d.get("rows"):
      continue
    out.append(
      rp.Finding(
        th.REPEATED_DATA,
        REPEATED,
        rp.STOP,
        f"span {span} holds the same {d['rows']:,} rows as span {same}, which {which} was "
        "trained on (the same lines, in any order): the source may be delivering old data "
        "again",
      )
    )
  return out


# New classes named in a finding; the rest are counted.
_NAMED_CLASSES = 5


def _label_findings(
  tonight: Night, reference: Night, label_key: str, thresholds: th.Thresholds
) -> list[rp.Finding]:
  """The label's classes: a class the live version was not trained on changes what the model
  answers (one score more), and an inverted or remapped label moves the class shares."""
  bound = thresholds.get(th.LABEL)
  now, ref = tonight.label_counts, reference.label_counts
  if bound is None or not now or not ref:
    return []
  now_total, ref_total = sum(now.values()), sum(ref.values())
  if not now_total or not ref_total:
    return []
  out = []
  # An empty cell or a missing token (NA, ...) is a label left out of training: no class.
  unseen = sorted(c for c, n in now.items() if n and not ref.get(c) and c.strip())
  new = [c for c in unseen if not missing_values.is_missing(c)]
  if new:
    rows = sum(now[c] for c in new)
    named = ", ".join(repr(c) for c in new[:_NAMED_CLASSES])
    if len(new) > _NAMED_CLASSES:
      named += f" and {len(new) - _NAMED_CLASSES} more"
    out.append(
      rp.Finding(
        label_key,
        th.LABEL,
        rp.STOP,
        f"the label {label_key!r} has classes the live version was not trained on: {named} "
        f"({rows:,} rows, {rp.pct(rows / now_total)}); a model trained on them answers other "
        "classes than the live one",
        rows / now_total,
        0.0,
      )
    )
  shares = {c: (ref.get(c, 0) / ref_total, now.get(c, 0) / now_total) for c in set(now) | set(ref)}
  worst = max(shares, key=lambda c: (abs(shares[c][1] - shares[c][0]), c))
  before, after = shares[worst]
  distance = abs(after - before)
  noise = 4.0 * math.sqrt(0.25 * (1.0 / ref_total + 1.0 / now_total))
  limit = max(bound, noise)
  if distance <= limit:
    return out
  return [
    *out,
    rp.Finding(
      label_key,
      th.LABEL,
      rp.STOP,
      f"the label {label_key!r} changed its class shares: {worst!r} {rp.pct(before)} -> "
      f"{rp.pct(after)} (L-infinity distance {distance:.3f} > {limit:.3g}; an inverted or "
      "remapped label?)",
      distance,
      limit,
    ),
  ]
