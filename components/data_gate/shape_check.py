"""Changes that keep a number column's shape: an offset, a scale with an offset, a periodic shift.

Plain Python and numpy. A divergence over quantile buckets sees such a change only by how far
it moves the values, so a small offset (a time stamp in another time zone, Kelvin for Celsius),
a scale with an offset (Fahrenheit for Celsius: x 1.8 + 32) or an hour of day shifted by a few
hours (a clock in another zone) can pass a drift bound; the unit check (`column_checks`) sees
only a pure change of scale past its bound (2x), and on values in the tens of thousands x 1.8 +
32 is a pure x 1.8, which is judged by its share of the values' size. Here tonight's quantiles
are compared with the reference's as they are and after the best such change; where the change
fits far better (`th.SHAPE` times, 5 by default) and the column clearly does not fit as it is,
the night stops and the change is named.

Natural drift between two normal nights moves a column's quantiles a little, in no single
pattern: the fit as it is stays close (under `_CLEAR_MISFIT`; for a pure scale, in shares of
the column's spread or of its size, the larger), and no change fits five times
better than that, since sampling noise bounds how well any change can fit (the largest ratio on
the normal nights of `bench/gate.py --sequence` is in docs/nightly.md). A periodic column read
from ten quantile buckets fits a shift no better than about 0.01 of its period, so a shift of
a few hours fits five to ten times better, not a hundred.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from components.data_gate import report as rp
from components.data_gate import stats_view as sv
from components.data_gate import thresholds as th
from core.column_types import SCHEMA_INT

# The quantiles compared (10% to 90%): the outer buckets reach the extremes, which move with single
# rows, and a quantile read inside them is a guess.
_LEVELS = np.linspace(0.1, 0.9, 17)
# The least mean distance between the quantiles as they are, in shares of the column's spread
# (its 10%-90% range, the wider night's), for a change to count: below it the column fits well
# enough as it is.
_CLEAR_MISFIT = 0.25
# The least distance between a periodic column's values as they are, in shares of the period
# (the mean distance each value must move around the circle: 0.03 of 24 hours is 43 minutes).
_CLEAR_PERIODIC_MISFIT = 0.03
# The misfit counted as none, for the ratio: quantiles read from buckets are no more exact.
_NOISE = 0.005
# A column needs this many distinct quantiles for a fit to mean anything (a column of a few
# values fits many changes).
_MIN_DISTINCT = 6
# Periodic columns, by name: (pattern, period, the largest value that says the column is one).
_PERIODIC = (
  (re.compile(r"(^|[^a-z])(hour|hr)s?($|[^a-z])", re.I), 24, 24),
  (re.compile(r"minute", re.I), 60, 60),
  (re.compile(r"(week_?day|day_?of_?week|dow|wday)", re.I), 7, 7),
  (re.compile(r"(^|[^a-z])day($|[^a-z])", re.I), 7, 7),
  (re.compile(r"month", re.I), 12, 12),
  (re.compile(r"(angle|direction|bearing|heading|azimuth|deg)", re.I), 360, 360),
)
# Kinds of change.
OFFSET = "offset"
SCALE = "scale"
AFFINE = "affine"
PERIODIC = "periodic"
# Cells the period is cut into for the distance around it (a tenth of an hour of a day).
_CELLS = 240


@dataclasses.dataclass(frozen=True)
class Change:
  """A change that makes the reference's column look like tonight's.

  Attributes:
    words: the change, as the stop names it ("the reference plus 8").
    as_is: the misfit as the column is.
    after: the misfit after the change.
    kind: OFFSET, SCALE, AFFINE or PERIODIC.
      relative: the misfit as the column is in shares of its size (the mean magnitude of the
      larger night's quantiles), which a scale is judged by: 0.44 for x 1.8 (None: not a scale).
  """

  words: str
  as_is: float
  after: float
  kind: str = ""
  relative: float | None = None

  @property
  def ratio(self) -> float:
    return self.as_is / max(self.after, _NOISE)


def _points(stats: sv.ColumnStats) -> np.ndarray | None:
  values = [stats.quantile(p) for p in _LEVELS]
  if any(v is None for v in values):
    return None
  return np.asarray(values, dtype=np.float64)


def _num(value: float) -> str:
  return f"{value:.3g}"


def linear_change(now: sv.ColumnStats, ref: sv.ColumnStats) -> Change | None:
  """The offset, scale or scale with an offset that fits tonight's quantiles best, preferring
  the simplest that fits nearly as well as the best; None where the quantiles cannot tell."""
  q_ref, q_now = _points(ref), _points(now)
  if q_ref is None or q_now is None:
    return None
  if min(len(np.unique(q_ref)), len(np.unique(q_now))) < _MIN_DISTINCT:
    return None
  spread = max(q_ref[-1] - q_ref[0], q_now[-1] - q_now[0])
  if not spread > 0:
    return None
  as_is = float(np.mean(np.abs(q_now - q_ref)) / spread)
  offset = float(np.median(q_now - q_ref))
  factor = float(q_ref @ q_now / (q_ref @ q_ref)) if q_ref @ q_ref > 0 else 0.0
  slope, intercept = np.polyfit(q_ref, q_now, 1)
  fits = [
    (
      OFFSET,
      f"the reference {'plus' if offset >= 0 else 'minus'} {_num(abs(offset))}",
      1.0,
      offset,
    ),
    (SCALE, f"the reference x {_num(factor)}", factor, 0.0),
    (
      AFFINE,
      f"the reference x {_num(slope)} {'+' if intercept >= 0 else '-'} {_num(abs(intercept))}",
      float(slope),
      float(intercept),
    ),
  ]
  scored = [
    (kind, words, float(np.mean(np.abs(q_now - (a * q_ref + b))) / spread))
    for kind, words, a, b in fits
    if a > 0
  ]
  if not scored:
    return None
  best = min(misfit for _, _, misfit in scored)
  kind, words, misfit = next(fit for fit in scored if fit[2] <= 1.5 * best + _NOISE)
  size = max(float(np.mean(np.abs(q_ref))), float(np.mean(np.abs(q_now))))
  relative = float(np.mean(np.abs(q_now - q_ref)) / size) if kind == SCALE and size > 0 else None
  return Change(words, as_is, misfit, kind, relative)


def period(name: str, now: sv.ColumnStats, ref: sv.ColumnStats) -> tuple[int, int] | None:
  """(period, first value) of a periodic column (hour of day, weekday, month, angle), told by
  its name and its values' range on both nights; None for any other column."""
  bounds = [(s.quantile(0.0), s.quantile(1.0)) for s in (now, ref)]
  if any(lo is None or hi is None for lo, hi in bounds):
    return None
  low, high = min(lo for lo, _ in bounds), max(hi for _, hi in bounds)
  return period_of(name, low, high, whole=now.type == SCHEMA_INT)


def period_of(name: str, low: float, high: float, whole: bool) -> tuple[int, int] | None:
  """(period, first value) of a column named `name` whose values lie from `low` to `high`
  (`whole`: whole numbers, which may count from 1); None where it is not periodic."""
  for pattern, length, largest in _PERIODIC:
    if pattern.search(name):
      if low < 0 or high > largest:
        return None
      return length, (1 if whole and low >= 1 and high == largest else 0)
  return None


def _cdf(stats: sv.ColumnStats, x: float) -> float:
  total = sum(c for _, _, c in stats.quantiles)
  seen = 0.0
  for low, high, count in stats.quantiles:
    if high > low:
      seen += count * min(1.0, max(0.0, (x - low) / (high - low)))
    elif x >= low:
      seen += count
  return seen / total if total > 0 else 0.0


def _shares(stats: sv.ColumnStats, length: int, first: int) -> np.ndarray:
  """The column's value shares in `_CELLS` cells of the period, read from its quantile buckets
  (whole numbers own the cells from half a step below to half above them)."""
  start = first - 0.5 if stats.type == SCHEMA_INT else 0.0
  edges = [_cdf(stats, start + i * length / _CELLS) for i in range(_CELLS + 1)]
  shares = np.diff(edges)
  return shares / shares.sum() if shares.sum() > 0 else shares


def _circular_distance(a: np.ndarray, b: np.ndarray) -> float:
  """The earth mover's distance between two share vectors around a circle, in shares of the
  period: the mean distance each value moves (cumulative differences less their median)."""
  moved = np.cumsum(a - b)
  return float(np.abs(moved - np.median(moved)).sum() / len(a))


def periodic_change(name: str, now: sv.ColumnStats, ref: sv.ColumnStats) -> Change | None:
  """The shift of a periodic column's values (around the period) that fits tonight best."""
  found = period(name, now, ref)
  if found is None or not now.quantiles or not ref.quantiles:
    return None
  length, first = found
  before, after = _shares(ref, length, first), _shares(now, length, first)
  if not before.sum() or not after.sum():
    return None
  # Whole steps of the period (hours of a day; degrees of a circle).
  step = _CELLS // length if _CELLS % length == 0 else 1
  distances = {k: _circular_distance(np.roll(before, k), after) for k in range(0, _CELLS, step)}
  shift = min((k for k in distances if k), key=lambda k: distances[k])
  by = shift * length / _CELLS
  return Change(
    f"the reference shifted by {_num(by)} (period {length})",
    distances[0],
    distances[shift],
    PERIODIC,
  )


def detect(
  name: str, now: sv.ColumnStats, ref: sv.ColumnStats, thresholds: th.Thresholds
) -> Change | None:
  """The change that keeps the number column's shape and makes the reference look like
  tonight's, where it fits `th.SHAPE` times better than as it is and the column clearly does
  not fit as it is; None otherwise, for a date or time stamp, and where the check is off."""
  ratio = thresholds.get(th.SHAPE, name)
  if ratio is None or sv.is_time_like(name, now, ref):
    return None
  periodic = periodic_change(name, now, ref)
  if periodic is not None:
    change, clear = periodic, _CLEAR_PERIODIC_MISFIT
  else:
    change, clear = linear_change(now, ref), _CLEAR_MISFIT
  if change is None or change.ratio < ratio:
    return None
  # A scale moves the values by a share of their size, which a column from near zero with a
  # long tail (amounts up to the hundred thousands) shows little of in shares of its spread:
  # it is judged by the larger of the two.
  if max(change.as_is, change.relative or 0.0) < clear:
    return None
  return change


def findings(
  name: str,
  now: sv.ColumnStats,
  ref: sv.ColumnStats,
  thresholds: th.Thresholds,
  read: set[str] | None,
) -> list[rp.Finding]:
  """A STOP finding (information where the live model does not read the column) when the number
  column looks like the reference after a change that keeps its shape (`detect`).

  Args:
    name: the column.
    now, ref: its statistics tonight and in the live version's data (number columns).
    thresholds: the gate's thresholds (`th.SHAPE`: the least improvement ratio).
    read: the columns the live model reads (None: every column).

  Returns:
    At most one finding.
  """
  change = detect(name, now, ref, thresholds)
  if change is None:
    return []
  return [finding(name, change, thresholds, read)]


def finding(
  name: str, change: Change, thresholds: th.Thresholds, read: set[str] | None
) -> rp.Finding:
  """The finding of a change `detect` found."""
  ratio = thresholds.get(th.SHAPE, name)
  kind, why = rp.STOP, ""
  if read is not None and name not in read:
    kind, why = rp.INFO, ": the live model does not read it"
  return rp.Finding(
    name,
    th.SHAPE,
    kind,
    f"{name!r} looks like {change.words}: its quantiles fit {change.ratio:.3g} times better "
    f"after that change than as they are (misfit {change.as_is:.3f} -> {change.after:.3f}"
    + (f", {change.relative:.2f} of its size" if change.relative is not None else "")
    + f"; > {ratio:g}){why}",
    change.ratio,
    ratio,
  )
