"""The data gate: tonight's data against the data the live version was trained on.

Plain values in, a `GateReport` out; no TFX types, so every check is tested on its own.
TFDV does the comparisons it has: `tfdv.validate_statistics` with the live version's schema,
drift comparators on every column it reads (Jensen-Shannon divergence over quantile buckets for
numbers, L-infinity distance for text), the share of values outside a text column's known
values, and the row count's drift. The statistics add what TFDV does not compare between two
datasets: a column emptied, a rise in empty cells, a number column rescaled (a unit change
keeps its shape, which a divergence over quantiles misses when the factor is small), and the
label's class shares.

Each finding stops the night, or is information: a compatible change (a column that was empty
and now has values, whole numbers that now have decimals, a new column), or drift in a column
the live model does not read, or in a date or time stamp, which moves with every night.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from components.data_gate import thresholds as th

# Finding kinds.
STOP = "stop"
INFO = "info"
# Checks a finding comes from (besides th.DRIFT, th.SCALE, th.NEW_VALUES, th.MISSING, th.LABEL,
# th.ROWS and th.LIVE_MODEL).
MISSING_COLUMN = "missing_column"
EMPTIED = "emptied"
TYPE = "type"
NEW_COLUMN = "new_column"

# Type names as the schema spells them, and as findings print them.
INT = "INT"
FLOAT = "FLOAT"
BYTES = "BYTES"
_TYPE_WORDS = {INT: "whole numbers", FLOAT: "numbers", BYTES: "text"}
# Number columns whose values are time stamps: seconds or milliseconds since 1970 from 1973 to
# 2099, or years; they move with every night, so their drift is information.
_EPOCH_RANGES = ((1e8, 4.1e9), (1e11, 4.1e12))
_YEAR_RANGE = (1800, 2200)
_YEAR_NAME = re.compile(r"(^|[^a-z])(year|yr)s?($|[^a-z])", re.IGNORECASE)
_DATE_TEXT = re.compile(r"\d{4}-\d{1,2}-\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?Z?")
# Share of a text column's recorded values that must look like dates for it to be a date column.
_DATE_SHARE = 0.9
# How many standard errors apart two means must be for a scale change to count.
_SCALE_MIN_Z = 5.0


@dataclasses.dataclass(frozen=True)
class Finding:
  """One difference between tonight's data and the live version's.

  Attributes:
    column: the column, or th.ROW_COUNT for the row count.
    check: what found it (th.DRIFT, TYPE, EMPTIED, ...).
    kind: STOP or INFO.
    text: what changed, in words, with the statistic and the threshold where there is one.
    value: the statistic, where there is one.
    threshold: the threshold it was held to.
    accepted: a STOP finding that `--accept-changes` let through.
  """

  column: str
  check: str
  kind: str
  text: str
  value: float | None = None
  threshold: float | None = None
  accepted: bool = False

  @property
  def stops(self) -> bool:
    return self.kind == STOP and not self.accepted


@dataclasses.dataclass(frozen=True)
class GateReport:
  """What the gate found.

  Attributes:
    live_version: the version compared against (None on a first night).
    findings: stopping findings first, then information.
    drift: column -> {"statistic", "value", "threshold"} for every column compared.
    rows: {"tonight", "reference"} training rows.
    accepted: the names `--accept-changes` gave (or the serving folder recorded).
    compared: False when there was nothing to compare with (a first night, or a live version
      pushed without its training data), with `reason` saying which.
  """

  live_version: int | None
  findings: tuple[Finding, ...] = ()
  drift: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
  rows: Mapping[str, int | None] = dataclasses.field(default_factory=dict)
  accepted: tuple[str, ...] = ()
  compared: bool = True
  reason: str = ""
  anomalies: Any = dataclasses.field(default=None, compare=False, repr=False)  # TFDV's proto

  @property
  def passed(self) -> bool:
    return not any(f.stops for f in self.findings)

  @property
  def stopping(self) -> list[Finding]:
    return [f for f in self.findings if f.stops]

  def short(self) -> str:
    """A few words for the live table."""
    if not self.compared:
      return f"not compared: {self.reason}"
    accepted = sum(f.accepted for f in self.findings)
    if not self.passed:
      names = sorted({f.column for f in self.stopping})
      return f"stopped: {', '.join(names)} changed"
    return f"passed vs version {self.live_version}" + (
      f" ({accepted} change(s) accepted)" if accepted else ""
    )

  def to_json(self) -> dict[str, Any]:
    return {
      "passed": self.passed,
      "compared": self.compared,
      "reason": self.reason,
      "live_version": self.live_version,
      "rows": dict(self.rows),
      "accepted": list(self.accepted),
      "findings": [dataclasses.asdict(f) for f in self.findings],
      "drift": {k: dict(v) for k, v in self.drift.items()},
    }

  @classmethod
  def from_json(cls, data: Mapping[str, Any]) -> GateReport:
    return cls(
      live_version=data.get("live_version"),
      findings=tuple(Finding(**f) for f in data.get("findings", [])),
      drift=data.get("drift", {}),
      rows=data.get("rows", {}),
      accepted=tuple(data.get("accepted", [])),
      compared=data.get("compared", True),
      reason=data.get("reason", ""),
    )


def with_finding(report: GateReport, finding: Finding) -> GateReport:
  """The report with one more finding (marked accepted when its column was)."""
  findings = [*report.findings, _mark(finding, report.accepted)]
  findings.sort(key=_order)
  return dataclasses.replace(report, findings=tuple(findings))


def _order(finding: Finding) -> tuple:
  return (not finding.stops, finding.kind != STOP, finding.column, finding.check)


def not_compared(reason: str, live_version: int | None = None) -> GateReport:
  """The report of a night with nothing to compare with; it passes."""
  return GateReport(live_version, compared=False, reason=reason)


# ----------------------------------------------------------------------------- statistics views


@dataclasses.dataclass(frozen=True)
class ColumnStats:
  """What the gate reads of one column's statistics."""

  name: str
  type: str
  rows: int
  values: int  # cells with a value
  quantiles: tuple[tuple[float, float, float], ...] = ()  # (low, high, count) buckets
  median: float | None = None
  mean: float | None = None
  std: float | None = None
  top: Mapping[str, float] = dataclasses.field(default_factory=dict)

  @property
  def empty_share(self) -> float:
    return 1.0 - min(self.values, self.rows) / self.rows if self.rows else 0.0

  def quantile(self, p: float) -> float | None:
    """The value below which a share p of the values lie (from the quantile buckets)."""
    total = sum(c for _, _, c in self.quantiles)
    if total <= 0:
      return None
    target, seen = p * total, 0.0
    for low, high, count in self.quantiles:
      if count > 0 and seen + count >= target:
        return low + (high - low) * (target - seen) / count
      seen += count
    return self.quantiles[-1][1]


def column_stats(dataset) -> dict[str, ColumnStats]:
  """The columns of a DatasetFeatureStatistics (a tensorflow_metadata proto), by name."""
  from tensorflow_metadata.proto.v0 import statistics_pb2

  types = {
    statistics_pb2.FeatureNameStatistics.INT: INT,
    statistics_pb2.FeatureNameStatistics.FLOAT: FLOAT,
    statistics_pb2.FeatureNameStatistics.STRING: BYTES,
    statistics_pb2.FeatureNameStatistics.BYTES: BYTES,
  }
  out = {}
  rows = int(dataset.num_examples)
  for feature in dataset.features:
    name = ".".join(feature.path.step) if feature.HasField("path") else feature.name
    kind = feature.WhichOneof("stats")
    if kind == "num_stats":
      common = feature.num_stats.common_stats
      quantiles = ()
      for hist in feature.num_stats.histograms:
        if hist.type == hist.QUANTILES:
          quantiles = tuple((b.low_value, b.high_value, b.sample_count) for b in hist.buckets)
      num = feature.num_stats
      known = common.tot_num_values > 0
      out[name] = ColumnStats(
        name,
        types[feature.type],
        rows,
        int(common.tot_num_values),
        quantiles,
        num.median if known else None,
        num.mean if known else None,
        num.std_dev if known else None,
      )
    elif kind == "string_stats":
      common = feature.string_stats.common_stats
      top = {v.value: v.frequency for v in feature.string_stats.top_values}
      if feature.string_stats.HasField("rank_histogram"):
        for b in feature.string_stats.rank_histogram.buckets:
          top.setdefault(b.label, b.sample_count)
      out[name] = ColumnStats(name, types[feature.type], rows, int(common.tot_num_values), top=top)
  return out


def schema_types(schema) -> dict[str, str]:
  """Column -> INT, FLOAT or BYTES, as a tensorflow_metadata Schema types them."""
  from tensorflow_metadata.proto.v0 import schema_pb2

  names = {schema_pb2.INT: INT, schema_pb2.FLOAT: FLOAT, schema_pb2.BYTES: BYTES}
  return {f.name: names[f.type] for f in schema.feature if f.type in names}


def schema_domains(schema) -> dict[str, set[str]]:
  """Column -> the values its string domain lists (text columns SchemaGen gave a domain)."""
  domains = {d.name: set(d.value) for d in schema.string_domain}
  out = {}
  for f in schema.feature:
    if f.HasField("domain") and f.domain in domains:
      out[f.name] = domains[f.domain]
    elif f.HasField("string_domain"):
      out[f.name] = set(f.string_domain.value)
  return out


# ----------------------------------------------------------------------------- the gate


@dataclasses.dataclass(frozen=True)
class Night:
  """One side of the comparison: a night's training statistics, schema and label counts.

  Attributes:
    statistics: the train split's DatasetFeatureStatistics.
    schema: the Schema inferred from it (the live version's: the one it was trained on).
    label_counts: the label's value counts on the train split (None: not counted, or a
      number label).
  """

  statistics: Any
  schema: Any
  label_counts: Mapping[str, int] | None = None


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
) -> GateReport:
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

  Returns:
    The report; `passed` is False when a finding stops the night.
  """
  now, ref = column_stats(tonight.statistics), column_stats(reference.statistics)
  now_types, ref_types = schema_types(tonight.schema), schema_types(reference.schema)
  read = None if read_columns is None else {*read_columns, label_key}
  findings: list[Finding] = []
  compared: dict[str, Mapping[str, Any]] = {}
  anomalies = _tfdv_anomalies(tonight.statistics, reference, thresholds, ref)
  for name in sorted(set(ref) | set(now)):
    findings += _column_findings(
      name, now.get(name), ref.get(name), now_types, ref_types, anomalies, thresholds
    )
    measured = anomalies.drift.get(name)
    if measured:
      compared[name] = measured
  findings += _drift_findings(anomalies.drift, now, ref, thresholds, read, anomalies.failing)
  findings += _dataset_findings(tonight, reference, anomalies, thresholds)
  if classification:
    findings += _label_findings(tonight, reference, label_key, thresholds)
  findings = sorted((_mark(f, accepted) for f in findings), key=_order)
  rows = {
    "tonight": int(tonight.statistics.num_examples),
    "reference": int(reference.statistics.num_examples),
  }
  return GateReport(
    live_version, tuple(findings), compared, rows, tuple(accepted), anomalies=anomalies.proto
  )


def _mark(finding: Finding, accepted: Sequence[str]) -> Finding:
  if finding.kind == STOP and th.is_accepted(finding.column, accepted):
    return dataclasses.replace(finding, accepted=True)
  return finding


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


def comparison_schema(reference: Night, thresholds: th.Thresholds, ref: Mapping[str, ColumnStats]):
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
  statistics, reference: Night, thresholds: th.Thresholds, ref: Mapping[str, ColumnStats]
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


# ----------------------------------------------------------------------------- columns


def _column_findings(
  name: str,
  now: ColumnStats | None,
  ref: ColumnStats | None,
  now_types: Mapping[str, str],
  ref_types: Mapping[str, str],
  anomalies: _Anomalies,
  thresholds: th.Thresholds,
) -> list[Finding]:
  """A column's own findings: gone, emptied, retyped, new values, more empty cells, rescaled."""
  if ref is None or ref.values == 0:
    if now is not None and now.values > 0:
      before = "was not in" if ref is None else "was empty in every row of"
      return [
        Finding(
          name,
          NEW_COLUMN,
          INFO,
          f"{name!r} {before} the live version's training data and has values tonight "
          f"(in {now.values:,} of {now.rows:,} rows): the new model reads it, the live one "
          "sees it as it was",
        )
      ]
    return []
  if now is None:
    return [
      Finding(
        name,
        MISSING_COLUMN,
        STOP,
        f"{name!r} is missing tonight (it was in the live version's training data, "
        f"{_pct(1 - ref.empty_share)} filled)",
      )
    ]
  if now.values == 0:
    return [
      Finding(
        name,
        EMPTIED,
        STOP,
        f"{name!r} is empty in every row tonight ({_pct(ref.empty_share)} empty in the live "
        "version's training data)",
        1.0,
      )
    ]
  out = []
  before, after = ref_types.get(name, ref.type), now_types.get(name, now.type)
  if before != after:
    compatible = {before, after} == {INT, FLOAT}
    out.append(
      Finding(
        name,
        TYPE,
        INFO if compatible else STOP,
        f"{name!r} was {_TYPE_WORDS[before]} ({before}) and is {_TYPE_WORDS[after]} ({after}) "
        "tonight" + (": a compatible change" if compatible else ""),
      )
    )
    if not compatible:
      return out
  out += _missing_finding(name, now, ref, thresholds)
  out += _new_value_finding(name, now, anomalies, thresholds)
  if before in (INT, FLOAT) and after in (INT, FLOAT):
    out += _scale_finding(name, now, ref, thresholds)
  return out


def _missing_finding(
  name: str, now: ColumnStats, ref: ColumnStats, thresholds: th.Thresholds
) -> list[Finding]:
  bound = thresholds.get(th.MISSING, name)
  rise = now.empty_share - ref.empty_share
  if bound is None:
    return []
  share = (now.empty_share + ref.empty_share) / 2
  noise = 4.0 * math.sqrt(share * (1 - share) * (1 / max(now.rows, 1) + 1 / max(ref.rows, 1)))
  limit = max(bound, noise)
  if rise <= limit:
    return []
  return [
    Finding(
      name,
      th.MISSING,
      STOP,
      f"{name!r} has more empty cells: {_pct(ref.empty_share)} -> {_pct(now.empty_share)} "
      f"(a rise of {rise:.2f} > {limit:.2g})",
      rise,
      limit,
    )
  ]


def _new_value_finding(
  name: str, now: ColumnStats, anomalies: _Anomalies, thresholds: th.Thresholds
) -> list[Finding]:
  if "ENUM_TYPE_UNEXPECTED_STRING_VALUES" not in anomalies.reasons.get(name, set()):
    return []
  bound = thresholds.get(th.NEW_VALUES, name)
  described = re.findall(r"([^,:]+?) \((~?<?\d+%)\)", anomalies.descriptions.get(name, ""))
  shown = ", ".join(f"{v.strip()!r} ({share})" for v, share in described[:3])
  return [
    Finding(
      name,
      th.NEW_VALUES,
      STOP,
      f"{name!r} holds values the live version's data never had"
      + (f": {shown}" if shown else "")
      + f" (more than {_pct(bound or 0)} of its cells)",
      None,
      bound,
    )
  ]


def _scale_finding(
  name: str, now: ColumnStats, ref: ColumnStats, thresholds: th.Thresholds
) -> list[Finding]:
  """A unit change: the median, the mean and the spread all grew (or shrank) past the bound.

  One estimator alone moves with a column's natural variation (a heavy tail moves the mean
  and the spread, a discrete column its median); a unit change moves every one by its factor.
  The means must also differ far beyond their sampling error (Welch's z above
  `_SCALE_MIN_Z`): a column of rare values (mostly zeros) moves its mean and spread by large
  factors between two small samples without any change in the source.
  """
  bound = thresholds.get(th.SCALE, name)
  if bound is None:
    return []
  ratios = {}
  for what, before, after in (
    ("median", ref.median, now.median),
    ("mean", ref.mean, now.mean),
    ("spread", ref.std, now.std),
  ):
    if before and after and (before > 0) == (after > 0):
      ratios[what] = after / before
  if len(ratios) < 2 or _welch_z(now, ref) < _SCALE_MIN_Z:
    return []
  if all(r > bound for r in ratios.values()):
    larger = True
  elif all(r < 1 / bound for r in ratios.values()):
    larger = False
  else:
    return []
  key = "median" if "median" in ratios else "mean"
  factor = ratios[key] if larger else 1 / ratios[key]
  before, after = (ref.median, now.median) if key == "median" else (ref.mean, now.mean)
  return [
    Finding(
      name,
      th.SCALE,
      STOP,
      f"{name!r} changed scale: its {key} went {_num(before)} -> {_num(after)}, "
      f"{factor:.3g} times {'larger' if larger else 'smaller'}, and its "
      f"{' and '.join(k for k in ratios if k != key)} alike (> {bound:g}; a unit change?)",
      factor,
      bound,
    )
  ]


def _welch_z(now: ColumnStats, ref: ColumnStats) -> float:
  """How many standard errors apart the two means are (0 when it cannot be told)."""
  if None in (now.mean, ref.mean, now.std, ref.std) or min(now.values, ref.values) < 2:
    return 0.0
  error = math.sqrt(now.std**2 / now.values + ref.std**2 / ref.values)
  return abs(now.mean - ref.mean) / error if error > 0 else 0.0


def _drift_findings(
  drift: Mapping[str, Mapping[str, Any]],
  now: Mapping[str, ColumnStats],
  ref: Mapping[str, ColumnStats],
  thresholds: th.Thresholds,
  read: set[str] | None,
  failing: set[str],
) -> list[Finding]:
  out = []
  for name in sorted(failing):
    measured = drift.get(name)
    if not measured or name not in now or now[name].values == 0:
      continue
    kind, why = STOP, ""
    if read is not None and name not in read:
      kind, why = INFO, ": the live model does not read it"
    elif is_time_like(name, now[name], ref.get(name)):
      kind, why = INFO, ": it holds dates or time stamps, which move with every night"
    out.append(
      Finding(
        name,
        th.DRIFT,
        kind,
        f"{name!r} drifted: {measured['statistic']} {measured['value']:.3f} > "
        f"{measured['threshold']:g}{why}",
        float(measured["value"]),
        float(measured["threshold"]),
      )
    )
  return out


def is_time_like(name: str, now: ColumnStats, ref: ColumnStats | None) -> bool:
  """Dates (text), time stamps since 1970 in seconds or milliseconds, or a year column."""
  sides = [s for s in (now, ref) if s is not None and s.values > 0]
  if not sides:
    return False
  if all(s.type == BYTES for s in sides):
    return all(_date_share(s) >= _DATE_SHARE for s in sides)
  if any(s.type == BYTES for s in sides):
    return False
  bounds = [(s.quantile(0.0), s.quantile(1.0)) for s in sides]
  if any(lo is None or hi is None for lo, hi in bounds):
    return False
  for low, high in _EPOCH_RANGES:
    if all(low <= lo and hi <= high for lo, hi in bounds):
      return True
  return bool(_YEAR_NAME.search(name)) and all(
    _YEAR_RANGE[0] <= lo and hi <= _YEAR_RANGE[1] for lo, hi in bounds
  )


def _date_share(stats: ColumnStats) -> float:
  total = sum(stats.top.values())
  if not total:
    return 0.0
  dated = sum(n for v, n in stats.top.items() if _DATE_TEXT.fullmatch(v.strip()))
  return dated / total


# ----------------------------------------------------------------------------- dataset, label


def _dataset_findings(
  tonight: Night,
  reference: Night,
  anomalies: _Anomalies,
  thresholds: th.Thresholds,
) -> list[Finding]:
  now, ref = int(tonight.statistics.num_examples), int(reference.statistics.num_examples)
  out = []
  if "COMPARATOR_LOW_NUM_EXAMPLES" in anomalies.dataset:
    bound = thresholds.get(th.ROWS)
    out.append(
      Finding(
        th.ROW_COUNT,
        th.ROWS,
        STOP,
        f"tonight has {now:,} training rows, {now / max(ref, 1):.2f} of the live version's "
        f"{ref:,} (< {bound:g})",
        now / max(ref, 1),
        bound,
      )
    )
  if "COMPARATOR_HIGH_NUM_EXAMPLES" in anomalies.dataset:
    bound = thresholds.get(th.MAX_ROWS)
    out.append(
      Finding(
        th.ROW_COUNT,
        th.ROWS,
        STOP,
        f"tonight has {now:,} training rows, {now / max(ref, 1):.2f} times the live version's "
        f"{ref:,} (> {bound:g})",
        now / max(ref, 1),
        bound,
      )
    )
  return out


def _label_findings(
  tonight: Night, reference: Night, label_key: str, thresholds: th.Thresholds
) -> list[Finding]:
  """The label's class shares: an inverted or remapped label moves them."""
  bound = thresholds.get(th.LABEL)
  now, ref = tonight.label_counts, reference.label_counts
  if bound is None or not now or not ref:
    return []
  now_total, ref_total = sum(now.values()), sum(ref.values())
  if not now_total or not ref_total:
    return []
  shares = {c: (ref.get(c, 0) / ref_total, now.get(c, 0) / now_total) for c in set(now) | set(ref)}
  worst = max(shares, key=lambda c: (abs(shares[c][1] - shares[c][0]), c))
  before, after = shares[worst]
  distance = abs(after - before)
  noise = 4.0 * math.sqrt(0.25 * (1.0 / ref_total + 1.0 / now_total))
  limit = max(bound, noise)
  if distance <= limit:
    return []
  return [
    Finding(
      label_key,
      th.LABEL,
      STOP,
      f"the label {label_key!r} changed its class shares: {worst!r} {_pct(before)} -> "
      f"{_pct(after)} (L-infinity distance {distance:.3f} > {limit:.3g}; an inverted or "
      "remapped label?)",
      distance,
      limit,
    )
  ]


# ----------------------------------------------------------------------------- words


def _pct(share: float) -> str:
  return f"{100 * share:.1f}%"


def _num(value: float) -> str:
  return f"{value:.4g}"


def stop_message(report: GateReport, how_to_accept: str) -> str:
  """The one line a stopped night ends with: each column, what changed, and how to accept it."""
  stops = report.stopping
  live = (
    f"live version {report.live_version}" if report.live_version is not None else "the live model"
  )
  shown = "; ".join(f.text for f in stops[:6])
  more = f"; and {len(stops) - 6} more" if len(stops) > 6 else ""
  names = sorted({f.column for f in stops})
  return (
    f"the data gate stopped this night, tonight's data differs from what {live} was trained on: "
    f"{shown}{more}. Nothing was trained or pushed and {live} stays live. If the change is "
    f"deliberate, {how_to_accept.format(columns=','.join(names))}"
  )
