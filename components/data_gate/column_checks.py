"""The data gate's checks of each column: gone, emptied, retyped, new values, more empty cells,
rescaled, drifted.

Plain values in (the columns' statistics, their schema types, what TFDV reported of them), a
list of `report.Finding` out. A compatible change (a column that was empty and now has values,
whole numbers that now have decimals, a new column) is information, and so is drift in a column
the live model does not read, or in a date or time stamp, which moves with every night.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Set
from typing import Any

from components.data_gate import bands
from components.data_gate import report as rp
from components.data_gate import stats_view as sv
from components.data_gate import thresholds as th
from core.column_types import SCHEMA_BYTES, SCHEMA_FLOAT, SCHEMA_INT

_TYPE_WORDS = {SCHEMA_INT: "whole numbers", SCHEMA_FLOAT: "numbers", SCHEMA_BYTES: "text"}
# How many standard errors apart two means must be for a scale change to count.
_SCALE_MIN_Z = 5.0
# How many standard errors tonight's share of new values must lie above the share a new sample
# is expected to hold (the reference's Good-Turing estimate) for the values to count.
_NEW_VALUES_Z = 3.0


def column_findings(
  name: str,
  now: sv.ColumnStats | None,
  ref: sv.ColumnStats | None,
  now_types: Mapping[str, str],
  ref_types: Mapping[str, str],
  reasons: Set[str],
  description: str,
  thresholds: th.Thresholds,
) -> list[rp.Finding]:
  """A column's own findings: gone, emptied, retyped, new values, more empty cells, rescaled.

  Args:
    name: the column.
    now, ref: its statistics tonight and in the live version's data (None: not there).
    now_types, ref_types: every column's schema type tonight and in the live version's data.
    reasons: the anomaly types TFDV reported for the column.
    description: TFDV's description of the column's anomalies.
    thresholds: the gate's thresholds.

  Returns:
    The column's findings, in the order they were found.
  """
  if ref is None or ref.values == 0:
    if now is not None and now.values > 0:
      before = "was not in" if ref is None else "was empty in every row of"
      return [
        rp.Finding(
          name,
          rp.NEW_COLUMN,
          rp.INFO,
          f"{name!r} {before} the live version's training data and has values tonight "
          f"(in {now.values:,} of {now.rows:,} rows): the new model reads it, the live one "
          "sees it as it was",
        )
      ]
    return []
  if now is None:
    return [
      rp.Finding(
        name,
        rp.MISSING_COLUMN,
        rp.STOP,
        f"{name!r} is missing tonight (it was in the live version's training data, "
        f"{rp.pct(1 - ref.empty_share)} filled)",
      )
    ]
  if now.values == 0:
    return [
      rp.Finding(
        name,
        rp.EMPTIED,
        rp.STOP,
        f"{name!r} is empty in every row tonight ({rp.pct(ref.empty_share)} empty in the live "
        "version's training data)",
        1.0,
      )
    ]
  out = []
  before, after = ref_types.get(name, ref.type), now_types.get(name, now.type)
  if before != after:
    compatible = {before, after} == {SCHEMA_INT, SCHEMA_FLOAT}
    out.append(
      rp.Finding(
        name,
        rp.TYPE,
        rp.INFO if compatible else rp.STOP,
        f"{name!r} was {_TYPE_WORDS[before]} ({before}) and is {_TYPE_WORDS[after]} ({after}) "
        "tonight" + (": a compatible change" if compatible else ""),
      )
    )
    if not compatible:
      return out
  out += _missing_finding(name, now, ref, thresholds)
  out += _new_value_finding(name, now, ref, reasons, description, thresholds)
  if before in (SCHEMA_INT, SCHEMA_FLOAT) and after in (SCHEMA_INT, SCHEMA_FLOAT):
    out += _scale_finding(name, now, ref, thresholds)
  return out


def _missing_finding(
  name: str, now: sv.ColumnStats, ref: sv.ColumnStats, thresholds: th.Thresholds
) -> list[rp.Finding]:
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
    rp.Finding(
      name,
      th.MISSING,
      rp.STOP,
      f"{name!r} has more empty cells: {rp.pct(ref.empty_share)} -> {rp.pct(now.empty_share)} "
      f"(a rise of {rise:.2f} > {limit:.2g})",
      rise,
      limit,
    )
  ]


def unseen_share(ref: sv.ColumnStats) -> tuple[float, float]:
  """The share of a new sample's cells expected to hold values the reference never had, and
  its variance: the Good-Turing estimate (the reference's values seen exactly once over its
  cells) and Esty's (1983) variance of its error, (n1 (1 - n1 / n) + 2 n2) / n^2 (n1, n2: the
  values seen once and twice; n: the reference's cells).

  The reference's value counts are its statistics' rank histogram (TFDV keeps 1,000 values; a
  column gets a domain with at most 100). Where the list was cut and its rarest value was seen
  once, every value left out was seen once too; otherwise the listed ones are counted alone.
  """
  if not ref.values or not ref.top:
    return 0.0, 0.0
  counts = [round(n) for n in ref.top.values()]
  once, twice = counts.count(1), counts.count(2)
  left_out = max(0, round(ref.values - sum(ref.top.values())))
  if left_out and min(counts) <= 1:
    once += left_out
  cells = max(ref.values, 1)
  share = min(1.0, once / cells)
  return share, (once * (1 - share) + 2 * twice) / cells**2


def new_value_share(now: sv.ColumnStats, ref: sv.ColumnStats) -> float:
  """The share of tonight's cells holding values the reference's counts do not list (cells
  tonight's list left out count as new)."""
  if not now.values:
    return 0.0
  new = sum(n for v, n in now.top.items() if v not in ref.top)
  new += max(0.0, now.values - sum(now.top.values()))
  return min(1.0, new / now.values)


def _new_value_finding(
  name: str,
  now: sv.ColumnStats,
  ref: sv.ColumnStats,
  reasons: Set[str],
  description: str,
  thresholds: th.Thresholds,
) -> list[rp.Finding]:
  """More than the bound of tonight's cells hold values the live version's data never had
  (TFDV's domain check), and clearly more than a new sample is expected to hold: a column
  whose reference holds many values seen once (38 car models in 117 rows) shows unseen values
  on every new sample. Within that expectation the values are information."""
  if "ENUM_TYPE_UNEXPECTED_STRING_VALUES" not in reasons:
    return []
  bound = thresholds.get(th.NEW_VALUES, name) or 0.0
  described = re.findall(r"([^,:]+?) \((~?<?\d+%)\)", description)
  shown = ", ".join(f"{v.strip()!r} ({share})" for v, share in described[:3])
  share = new_value_share(now, ref)
  expected, variance = unseen_share(ref)
  # Tonight's share errs from the expected one by the estimate's error and tonight's sampling.
  variance += expected * (1 - expected) / max(now.values, 1)
  chance = expected + _NEW_VALUES_Z * math.sqrt(variance)
  limit = max(bound, chance)
  sampled = (
    f"expected {rp.pct(expected)} from the live version's values seen once, up to "
    f"{rp.pct(chance)} by chance"
  )
  if share <= limit:
    return [
      rp.Finding(
        name,
        th.NEW_VALUES,
        rp.INFO,
        f"{name!r} holds values the live version's data never had in {rp.pct(share)} of its "
        f"cells" + (f" ({shown})" if shown else "") + f", as a new sample of it does ({sampled})",
        share,
        limit,
      )
    ]
  return [
    rp.Finding(
      name,
      th.NEW_VALUES,
      rp.STOP,
      f"{name!r} holds values the live version's data never had"
      + (f": {shown}" if shown else "")
      + f" ({rp.pct(share)} of its cells > {rp.pct(bound)}; a new sample: {sampled})",
      share,
      limit,
    )
  ]


def _scale_finding(
  name: str, now: sv.ColumnStats, ref: sv.ColumnStats, thresholds: th.Thresholds
) -> list[rp.Finding]:
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
    rp.Finding(
      name,
      th.SCALE,
      rp.STOP,
      f"{name!r} changed scale: its {key} went {rp.num(before)} -> {rp.num(after)}, "
      f"{factor:.3g} times {'larger' if larger else 'smaller'}, and its "
      f"{' and '.join(k for k in ratios if k != key)} alike (> {bound:g}; a unit change?)",
      factor,
      bound,
    )
  ]


def _welch_z(now: sv.ColumnStats, ref: sv.ColumnStats) -> float:
  """How many standard errors apart the two means are (0 when it cannot be told)."""
  if None in (now.mean, ref.mean, now.std, ref.std) or min(now.values, ref.values) < 2:
    return 0.0
  error = math.sqrt(now.std**2 / now.values + ref.std**2 / ref.values)
  return abs(now.mean - ref.mean) / error if error > 0 else 0.0


def drift_findings(
  drift: Mapping[str, Mapping[str, Any]],
  now: Mapping[str, sv.ColumnStats],
  ref: Mapping[str, sv.ColumnStats],
  thresholds: th.Thresholds,
  read: set[str] | None,
  failing: set[str],
) -> list[rp.Finding]:
  """The columns TFDV found drifted: a STOP, or information where the live model does not read
  the column or it holds dates or time stamps.

  Args:
    drift: column -> TFDV's drift measurement ({"statistic", "value", "threshold"}).
    now, ref: the columns' statistics tonight and in the live version's data.
    thresholds: the gate's thresholds.
    read: the columns the live model reads (None: every column).
    failing: the columns above their drift bound (their band's, where they have one).

  Returns:
    One finding per drifted column that has values tonight, by name.
  """
  out = []
  for name in sorted(failing):
    measured = drift.get(name)
    if not measured or name not in now or now[name].values == 0:
      continue
    kind, why = rp.STOP, ""
    if read is not None and name not in read:
      kind, why = rp.INFO, ": the live model does not read it"
    elif sv.is_time_like(name, now[name], ref.get(name)):
      kind, why = rp.INFO, ": it holds dates or time stamps, which move with every night"
    out.append(
      rp.Finding(
        name,
        th.DRIFT,
        kind,
        f"{name!r} drifted: {measured['statistic']} {measured['value']:.3f} > "
        f"{bands.describe(measured)}{why}",
        float(measured["value"]),
        float(measured["threshold"]),
      )
    )
  return out
