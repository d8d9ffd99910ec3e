"""A date split over number columns: year, month and, where there is one, day.

Tables often carry a date as separate columns (nycflights13's flights and weather: `year`,
`month`, `day`). Read as three numbers, the network sees a month's effect and a day-of-month's
effect, but not the day itself: on openintro's nycflights (arrival delays of 32,735 flights,
with days of bad weather) the default model was 1.2% RMSE behind HistGradientBoosting, which
splits on month and day together, and with the date those columns spell it is 1.7% ahead
(bench/results/20261129T1150Z-nycflights-date-parts.md). The profile therefore
recognises such columns by their names and values (`find_date_parts`), and the model reads the
date they spell as it reads a date column (layers.DatePartsFeatures: trend, seasons and
quantile bins of the days), besides the numbers themselves.

Plain Python and numpy, like profile.py, which calls it on the training split's row sample.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Sequence

import numpy as np

from models.tabular.text_columns import DATE_SHARE, DateStats, days_stats

YEAR, MONTH, DAY = "year", "month", "day"
# A column name, lower-cased, that ends in one of these words names that part of a date; what
# comes before it (less a separator) names the date, so `birth_year`, `birth_month` and
# `birth_day` are one date and `year`, `month`, `day` another.
_PART_WORDS = {
  "year": YEAR,
  "yr": YEAR,
  "month": MONTH,
  "mon": MONTH,
  "day": DAY,
  "mday": DAY,
  "dayofmonth": DAY,
}
_NAME = re.compile(r"^(.*?)[ _.\-]?(" + "|".join(sorted(_PART_WORDS, key=len, reverse=True)) + ")$")
# Values each part may take; a year past these is not a calendar year (or not one of ours).
_RANGES = {YEAR: (1, 9999), MONTH: (1, 12), DAY: (1, 31)}
# A day column whose values in at least this many rows are five or more of 1..7 holds days of
# the week: 20 days of the month drawn at random all fall under 8 less than once in 10**12.
_WEEKDAY_MIN_ROWS = 20


@dataclasses.dataclass(frozen=True)
class DateParts:
  """A date spelled by number columns (`day` None: the first of each month) and its days."""

  year: str
  month: str
  day: str | None
  stats: DateStats

  @property
  def columns(self) -> tuple[str, ...]:
    return (self.year, self.month) + ((self.day,) if self.day else ())

  @property
  def name(self) -> str:
    """How the summary names the date: its columns joined by '/'."""
    return "/".join(self.columns)


def _groups(names: Sequence[str]) -> dict[str, dict[str, str]]:
  """{prefix: {part: column}} for the names that name a part of a date, one column per part."""
  groups: dict[str, dict[str, list[str]]] = {}
  for name in names:
    match = _NAME.match(name.lower())
    if match:
      part = _PART_WORDS[match[2]]
      groups.setdefault(match[1], {}).setdefault(part, []).append(name)
  # Two columns for one part of one date (`Day` and `day`) leave it unknown which to read.
  return {
    prefix: {part: names[0] for part, names in parts.items() if len(names) == 1}
    for prefix, parts in groups.items()
  }


def find_date_parts(
  columns: dict[str, np.ndarray], numeric_bins: int = 0, rows: int | None = None
) -> tuple[DateParts, ...]:
  """The dates spelled by number columns, from a sample of their values (NaN: missing).

  A date needs a year and a month column (a day column is optional) with the same prefix in
  their names, and DATE_SHARE of the sampled rows with all its parts present must hold whole
  numbers that make a calendar date. A day column that fails that, or that holds days of the
  week (five or more of the values 1 to 7 and none above), is left out of the date and stays a
  number: the year and month alone spell the first of each month.

  Args:
    columns: each number column's sampled values, by name, the same rows in each.
    numeric_bins: bins per number; a date gets `text_columns.date_bins` of them (0: none),
      as `text_columns.days_stats` decides.
    rows: the rows the sample stands for (None: the sample's own).

  Returns:
    The dates found, in the order of their year columns.
  """
  found = []
  for parts in _groups(list(columns)).values():
    if YEAR not in parts or MONTH not in parts:
      continue
    names = {part: parts[part] for part in (YEAR, MONTH, DAY) if part in parts}
    values = {part: columns[name].astype(np.float64) for part, name in names.items()}
    days = _spelled_days(values) if DAY in values else None
    if days is None:  # No day column, or one that is no day of the month: the 1st of each.
      names.pop(DAY, None)
      values.pop(DAY, None)
      days = _spelled_days(values)
    if days is None:
      continue
    scale = 1.0 if rows is None else rows / len(values[YEAR])
    stats = days_stats(days, False, numeric_bins, round(days.size * scale))
    found.append((names[YEAR], DateParts(names[YEAR], names[MONTH], names.get(DAY), stats)))
  order = {name: i for i, name in enumerate(columns)}
  return tuple(parts for _, parts in sorted(found, key=lambda item: order[item[0]]))


def _spelled_days(values: dict[str, np.ndarray]) -> np.ndarray | None:
  """The days since 1970-01-01 that `values` ({part: column}) spell on the rows where every
  part is present, or None if too few of them make a calendar date or the day column reads as
  a day of the week."""
  present = np.all([~np.isnan(v) for v in values.values()], axis=0)
  if not present.any():
    return None
  if DAY in values:
    day = values[DAY][present]
    seen = np.unique(day)
    # 1..7 (or 0..6, which the calendar check refuses) in many rows: a day of the week.
    if day.size >= _WEEKDAY_MIN_ROWS and seen.size >= 5 and seen.max() <= 7:
      return None
  days = _days(
    values[YEAR][present],
    values[MONTH][present],
    values[DAY][present] if DAY in values else np.ones(int(present.sum())),
  )
  if np.isnan(days).mean() > 1 - DATE_SHARE:
    return None
  return days[~np.isnan(days)]


def _days(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
  """Days since 1970-01-01 of each (year, month, day); NaN where they make no date."""
  epoch = datetime.date(1970, 1, 1)
  out = np.full(year.shape, np.nan)
  for i, ymd in enumerate(zip(year.tolist(), month.tolist(), day.tolist(), strict=True)):
    low_high = zip(ymd, (_RANGES[YEAR], _RANGES[MONTH], _RANGES[DAY]), strict=True)
    if not all(low <= v <= high and v == int(v) for v, (low, high) in low_high):
      continue
    try:
      out[i] = (datetime.date(*(int(v) for v in ymd)) - epoch).days
    except ValueError:  # 31 April, 29 February of a common year.
      continue
  return out
