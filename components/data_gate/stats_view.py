"""What the data gate reads of a night's statistics and schema: columns, types, domains, dates."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from core import column_types

# Number columns whose values are time stamps: seconds or milliseconds since 1970 from 1973 to
# 2099, or years; they move with every night, so their drift is information.
_EPOCH_RANGES = ((1e8, 4.1e9), (1e11, 4.1e12))
_YEAR_RANGE = (1800, 2200)
_YEAR_NAME = re.compile(r"(^|[^a-z])(year|yr)s?($|[^a-z])", re.IGNORECASE)
_DATE_TEXT = re.compile(r"\d{4}-\d{1,2}-\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?Z?")
# Share of a text column's recorded values that must look like dates for it to be a date column.
_DATE_SHARE = 0.9


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
        _schema_type(feature),
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
      out[name] = ColumnStats(
        name, _schema_type(feature), rows, int(common.tot_num_values), top=top
      )
  return out


def _schema_type(feature) -> str:
  """The schema type (core.column_types.SCHEMA_TYPES) of a feature's statistics."""
  from tensorflow_metadata.proto.v0 import statistics_pb2

  name = statistics_pb2.FeatureNameStatistics.Type.Name(feature.type)
  return column_types.STATS_TO_SCHEMA[name]


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


def is_time_like(name: str, now: ColumnStats, ref: ColumnStats | None) -> bool:
  """Dates (text), time stamps since 1970 in seconds or milliseconds, or a year column."""
  sides = [s for s in (now, ref) if s is not None and s.values > 0]
  if not sides:
    return False
  if all(s.type == column_types.SCHEMA_BYTES for s in sides):
    return all(_date_share(s) >= _DATE_SHARE for s in sides)
  if any(s.type == column_types.SCHEMA_BYTES for s in sides):
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
