"""Each column's band of normal drift, learned from the drift the gate measured on past nights.

Plain Python, no TensorFlow. A fixed bound (Jensen-Shannon divergence 0.4) lets a column whose
normal night-to-night divergence is 0.001 move fifty times that and pass, and would stop every
night a column whose natural drift is always near the bound. So each column is held to its own
history: the statistic the gate measured for it (the same statistic it is measured with
tonight) over the past normal nights (nights the gate passed, the column not accepted), and
tonight's value alarms above their mean plus `th.BAND` (3) standard deviations, NannyML's rule
across reference chunks. Until `MIN_NIGHTS` normal nights hold the column, the fixed bound
applies. The fixed bound stays as a cap (a band never lets through what it stops), and a
column's own `--gate-threshold COLUMN:drift=...` replaces its band.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from components.data_gate import thresholds as th

# Normal nights a column needs before its band replaces the fixed bound: a mean and a standard
# deviation over fewer nights say too little of the next one.
MIN_NIGHTS = 5
# The most recent normal nights a band is learned from: data drifts slowly, and last season's
# nights say less of tonight than last week's.
WINDOW = 30
# The floor of the standard deviation, as a share of the mean and absolutely. Between two samples
# of one distribution, a divergence over B buckets behaves like a scaled chi-squared with B - 1
# degrees of freedom, whose standard deviation is sqrt(2 / (B - 1)) of its mean: a half for
# TFDV's 10 quantile buckets, but sqrt(2) where a column's values tie into two buckets (a count
# that is mostly 0), and a history of five nights that happen to agree (or a constant one: the
# same rows every night) must not make that sampling noise an alarm. So the band is at least
# 5.5 times the column's mean. The absolute floor keeps a column whose normal divergence is
# near 0 from stopping on a wobble of a few rows (count columns of a few thousand rows wobble
# by 0.05 between normal nights); 0.015 (a bound of mean + 0.045) still stops a column of
# normal divergence 0.001 that moves 50 times that, far below the fixed bound of 0.4.
RELATIVE_STD_FLOOR = 1.5
ABSOLUTE_STD_FLOOR = 0.015


@dataclasses.dataclass(frozen=True)
class Band:
  """A column's normal drift: mean and standard deviation of its past nights' statistic.

  Attributes:
    statistic: what was measured ("Jensen-Shannon divergence", "L-infinity distance").
    mean: the mean over the nights.
    std: their standard deviation (sample), before the floor.
    nights: how many nights.
    sigmas: the multiple of the (floored) standard deviation above the mean that alarms.
    cap: the fixed bound, which the band never exceeds.
  """

  statistic: str
  mean: float
  std: float
  nights: int
  sigmas: float
  cap: float

  @property
  def floored_std(self) -> float:
    return max(self.std, RELATIVE_STD_FLOOR * self.mean, ABSOLUTE_STD_FLOOR)

  @property
  def bound(self) -> float:
    return min(self.cap, self.mean + self.sigmas * self.floored_std)

  def describe(self) -> str:
    """The band in words, for a stop's line: 'its band 0.046 (mean 0.001 + 3 x 0.015 over 7
    normal nights)'."""
    band = (
      f"mean {self.mean:.3g} + {self.sigmas:g} x {self.floored_std:.3g} over {self.nights} "
      "normal nights"
    )
    if self.bound >= self.cap:
      return f"the fixed bound {self.cap:g} (its band, {band}, is wider)"
    return f"its band {self.bound:.3g} ({band})"

  def to_json(self) -> dict[str, Any]:
    return {
      "mean": self.mean,
      "std": self.std,
      "floored_std": self.floored_std,
      "nights": self.nights,
      "sigmas": self.sigmas,
      "bound": self.bound,
      "cap": self.cap,
    }


def normal_history(reports: Iterable[Mapping[str, Any] | None]) -> list[Mapping[str, Any]]:
  """The gate reports of normal nights, oldest first, at most the last `WINDOW`: nights the gate
  compared and passed (a stopped night's drift is no column's normal)."""
  out = [r for r in reports if r and r.get("compared", True) and r.get("passed")]
  return out[-WINDOW:]


def history_values(
  history: Sequence[Mapping[str, Any]], column: str, statistic: str
) -> list[float]:
  """The column's statistic over the normal nights that measured it with `statistic`, leaving
  out nights that accepted a change to it (a deliberate change is not its normal)."""
  out = []
  for report in history:
    measured = (report.get("drift") or {}).get(column)
    if not measured or measured.get("statistic") != statistic:
      continue
    accepted = any(
      f.get("column") == column and f.get("accepted") for f in report.get("findings") or ()
    )
    value = measured.get("value")
    if not accepted and isinstance(value, (int, float)) and math.isfinite(value):
      out.append(float(value))
  return out


def learn(
  history: Sequence[Mapping[str, Any]],
  column: str,
  statistic: str,
  thresholds: th.Thresholds,
  cap: float,
) -> Band | None:
  """The column's band, or None where the fixed bound applies: fewer than `MIN_NIGHTS` normal
  nights, bands off (`band=off`), or the column's own drift threshold set.

  Args:
    history: normal nights' gate reports (`normal_history`).
    column: the column.
    statistic: tonight's statistic for it.
    thresholds: the gate's thresholds.
    cap: the fixed bound tonight (the column's drift threshold).
  """
  sigmas = thresholds.get(th.BAND, column)
  if sigmas is None or th.DRIFT in thresholds.columns.get(column, {}):
    return None
  values = history_values(history, column, statistic)
  if len(values) < MIN_NIGHTS:
    return None
  mean = sum(values) / len(values)
  std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
  return Band(statistic, mean, std, len(values), sigmas, cap)


def apply(
  drift: Mapping[str, dict[str, Any]],
  history: Sequence[Mapping[str, Any]],
  thresholds: th.Thresholds,
) -> set[str]:
  """Holds each measured column to its band: sets its `threshold` to the band's bound and adds
  the band (`band`) to its measurement, in place.

  Args:
    drift: column -> {"statistic", "value", "threshold"} as TFDV measured it, the threshold
      the fixed bound.
    history: normal nights' gate reports (`normal_history`).
    thresholds: the gate's thresholds.

  Returns:
    The columns above their bound (band or fixed).
  """
  failing = set()
  for column, measured in drift.items():
    band = learn(history, column, measured["statistic"], thresholds, float(measured["threshold"]))
    if band is not None:
      measured["threshold"] = band.bound
      measured["band"] = band.to_json()
    if float(measured["value"]) > float(measured["threshold"]):
      failing.add(column)
  return failing


def describe(measured: Mapping[str, Any]) -> str:
  """A measured column's bound in words: its band where it has one, else the fixed bound."""
  band = measured.get("band")
  if not band:
    return f"{measured['threshold']:g}"
  return Band(
    measured["statistic"], band["mean"], band["std"], band["nights"], band["sigmas"], band["cap"]
  ).describe()
