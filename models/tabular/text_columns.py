"""How the default model reads a text column: a number, a date, free text (words), or categories.

Plain Python and numpy, like profile.py, which calls it for each text column of the training
split; layers.py reads the same way inside the model (TextNumber, DateFeatures, WordsMultiHot,
CategoryOneHot).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
from collections import Counter

import numpy as np

from core import missing_values
from core.written_numbers import parse_number
from models.tabular.quantiles import quantile_edges

# A text column is a date column when this share of its sampled values parse as dates, and a
# number column when this share parse as numbers written for people (core.written_numbers).
DATE_SHARE = 0.95
# A text column is free text (job titles, names, model lines) when its distinct values exceed
# this share of its cells, i.e. a value repeats fewer than 5 times on average. Such a column is
# read as words, and keeps only the words found in `free_text_min_count(cells)` cells: an
# embedding of values seen twice learns the rows they were seen in (openintro's loans: job
# titles as values put the RMSE 5.6% behind HistGradientBoosting's, 1.7% with only the titles
# seen 20 times).
FREE_TEXT_SHARE = 0.2
# Words are cut at ASCII white space and punctuation after ASCII lower-casing (letters beyond
# ASCII stay inside words); layers.WordsMultiHot cuts the same way.
WORD_SEPARATORS = r"[\t-\r !-/:-@\[-`{-~]+"
_WORD_SPLIT = re.compile(WORD_SEPARATORS.encode())


@dataclasses.dataclass(frozen=True)
class DateStats:
  """A date column: the mean and spread of its days since 1970-01-01, and whether it has times.

  `edges` are quantile bin edges of the standardized days ((day - day_mean) / day_scale), for a
  piecewise-linear trend; () where the column has one day or bins are off. `order`: how its
  cells put the year, month and day (YMD, MDY or DMY).
  """

  day_mean: float
  day_scale: float
  with_time: bool
  edges: tuple[float, ...] = ()
  order: str = "ymd"


def free_text_min_count(cells: int) -> int:
  """Cells a word of free text is found in at least, to keep a slot: 0.2 x sqrt(cells), at least 2.

  A word needs more cells in a larger table: on openintro's loans (9,167 job titles) words
  found in 5 cells put the RMSE 6.0% behind HistGradientBoosting's, in 20 cells 1.7%; on
  vega_datasets' cars (324 training rows) words found in 5 cells (car makes and lines) made
  the accuracy 0.927 against 0.805 with 20.
  """
  return max(2, round(0.2 * math.sqrt(max(cells, 0))))


def rows_per_value(values: np.ndarray, target: np.ndarray) -> float:
  """The rows a text value needs before its rows' mean label is more signal than noise.

  One-way analysis of variance of a numeric label by the column's values: the label's variance
  within a value over the variance of the values' true means (the between-value mean square
  less the within-value one, per row of a value). A value seen this many times has a mean label
  as reliable as it is noisy; inf where the values explain none of the label. Empty cells and
  rows without a label (NaN) are left out.

  Args:
    values: the column's cells (bytes).
    target: the label of each row, float.
  """
  keep = (values != b"") & np.isfinite(target)
  values, target = values[keep], target[keep].astype(np.float64)
  _, index, counts = np.unique(values, return_inverse=True, return_counts=True)
  groups, rows = len(counts), len(target)
  if groups < 2 or rows <= groups:
    return math.inf
  means = np.bincount(index, weights=target) / counts
  within = float(np.square(target - means[index]).sum()) / (rows - groups)
  between = float((counts * np.square(means - target.mean())).sum()) / (groups - 1)
  rows_per_group = (rows - float(np.square(counts).sum()) / rows) / (groups - 1)
  signal = (between - within) / rows_per_group
  return within / signal if signal > 0 else math.inf


def number_values(values: np.ndarray) -> np.ndarray | None:
  """The values of a text column's sampled cells when it holds numbers written for people: at
  least DATE_SHARE of its non-empty cells that are not missing-value tokens (NA, N/A, ...)
  parse as numbers. Returns the parsed values (one per cell that parses), else None."""
  present = [v.decode("utf-8", "replace") for v in values.tolist() if v]
  present = [v for v in present if not missing_values.is_missing(v)]
  allowed = (1 - DATE_SHARE) * len(present)  # cells that may not parse
  parsed = []
  for cell in present:
    value = parse_number(cell)
    if value is not None:
      parsed.append(value)
    elif (allowed := allowed - 1) < 0:
      return None  # most text columns stop here, after a few cells
  return np.asarray(parsed, np.float64) if parsed else None


def is_free_text(distinct: int, present: int) -> bool:
  """Whether a text column with `distinct` values over `present` cells is free text."""
  return present > 0 and distinct > FREE_TEXT_SHARE * present


def words(value: bytes) -> list[bytes]:
  """The words of a free-text cell, as layers.WordsMultiHot cuts them."""
  return [w for w in _WORD_SPLIT.sub(b" ", value.lower()).split(b" ") if w]


def word_counts(counts: Counter) -> Counter:
  """Cells holding each word, from the counts of whole cells."""
  out: Counter = Counter()
  for value, n in counts.items():
    for word in set(words(value)):
      out[word] += n
  return out


def vocabulary(counts: Counter, max_size: int, min_count: int) -> tuple[str, ...]:
  """The most frequent values seen at least `min_count` times, most frequent first."""
  # Ties broken by value so that reruns build identical models.
  ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
  return tuple(v.decode("utf-8", "replace") for v, n in ranked[:max_size] if n >= min_count)


_DATE = re.compile(
  r"(\d{4})[-/.](\d{2})[-/.](\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2}(?:\.\d*)?)?.*)?"
)


# The orders of a date's fields: year first (ISO), month first (the US) or day first (Europe),
# the last two with one- or two-digit months and days and a two- or four-digit year
# ("3/14/2012", "03/13/86"); see date_text.py for the same in TensorFlow.
YMD, MDY, DMY = "ymd", "mdy", "dmy"
DATE_ORDERS = (YMD, MDY, DMY)
_YEAR_LAST = re.compile(r"(\d{1,2})[-/.](\d{1,2})[-/.](\d{4}|\d{2})(?=$|[T ])(.*)", re.DOTALL)


def parse_date(text: str, order: str = YMD) -> tuple[datetime.date, bool] | None:
  """(date, has a time) for a cell in the layout DateFeatures reads with `order`, else None."""
  year_last = _YEAR_LAST.fullmatch(text) if order != YMD else None
  if year_last:
    first, second, year, rest = year_last.groups()
    if len(year) == 2:  # POSIX's %y: 69 to 99 in the 1900s, 00 to 68 in the 2000s.
      year = ("19" if int(year) >= 69 else "20") + year
    month, day = (first, second) if order == MDY else (second, first)
    text = f"{year}-{int(month):02d}-{int(day):02d}{rest}"
  match = _DATE.fullmatch(text)
  if not match:
    return None
  try:
    day = datetime.date(int(match[1]), int(match[2]), int(match[3]))
  except ValueError:
    return None
  return day, match[4] is not None


# A date column gets this many times the bins of a number (64 by default), and a series twice
# as many: a column where most rows have a day of their own (SERIES_SHARE of the sampled cells
# are distinct days: a month or a day per row) is the axis everything else moves along. On
# ggplot2's economics (574 months) the trend as one scaled value left the RMSE 62% behind
# HistGradientBoosting's, 64 bins 14% behind, 128 bins 17% ahead; on openintro's email (3,921
# messages over a year) 128 bins of its time stamp cost 1.0 accuracy point against 64.
DATE_BINS_PER_NUMERIC_BIN = 4
SERIES_SHARE = 0.5
# A date that is not a series gets its bins only where its days hold this many training rows
# each, on average. Where few rows share a day, a day picks out the rows it holds, as an
# identifier would, and its bins let the network learn them: openintro's epa2021 (893 cars
# over about 150 release dates, 6 a day) was 5.1% RMSE behind HistGradientBoosting with 64
# bins of its release dates, 4.6% with 16 and 0.7% with none (the trend and seasons stay).
# Where many rows share a day, the bins carry what the rows of a day share: the weather of
# nycflights' days (72 flights a day) is worth 1.7% RMSE.
DATE_BIN_MIN_ROWS_PER_DAY = 10


def date_bins(numeric_bins: int, series: bool = False) -> int:
  """Quantile bins of a date column for `numeric_bins` bins per number (0: none)."""
  return DATE_BINS_PER_NUMERIC_BIN * (2 if series else 1) * max(numeric_bins, 0)


def date_stats(
  values: np.ndarray, numeric_bins: int = 0, rows: int | None = None
) -> DateStats | None:
  """DateStats when DATE_SHARE of the sampled non-empty cells parse as dates, else None.

  With `numeric_bins`, the days get `date_bins` quantile edges as a number would
  (`quantile_edges`): one edge per distinct day where there are few of them. `rows`: the
  non-empty cells the sample stands for (None: the sample's own).
  """
  present = [v.decode("utf-8", "replace") for v in values.tolist() if v]
  if not present:
    return None
  order = date_order(present)
  parsed = [p for p in (parse_date(v, order) for v in present) if p is not None]
  if len(parsed) < DATE_SHARE * len(present):
    return None
  epoch = datetime.date(1970, 1, 1)
  days = np.array([(d - epoch).days for d, _ in parsed], np.float64)
  if rows is not None:
    rows = round(rows * len(parsed) / len(present))
  stats = days_stats(days, any(t for _, t in parsed), numeric_bins, rows)
  return dataclasses.replace(stats, order=order)


def date_order(cells: list[str]) -> str:
  """YMD unless most cells put the year last; then DMY where a first field is past 12 (a day),
  else MDY: a column whose days never pass 12 cannot tell, and is read month first."""
  year_last = [m for m in map(_YEAR_LAST.fullmatch, cells) if m]
  if len(year_last) < DATE_SHARE * len(cells):
    return YMD
  return DMY if any(int(m[1]) > 12 for m in year_last) else MDY


def days_stats(
  days: np.ndarray, with_time: bool, numeric_bins: int = 0, rows: int | None = None
) -> DateStats:
  """DateStats of dates given as days since 1970-01-01 (at least one): their mean and spread,
  and with `numeric_bins` the quantile edges `date_stats` describes, where the date is a series
  or its days hold DATE_BIN_MIN_ROWS_PER_DAY rows each. `rows`: the dates the sample `days`
  stands for (None: the sample's own)."""
  day_mean, day_scale = float(days.mean()), float(days.std()) or 1.0
  distinct = np.unique(days).size
  series = distinct >= SERIES_SHARE * days.size
  rows_per_day = (days.size if rows is None else rows) / distinct
  bins = date_bins(numeric_bins, series)
  if not series and rows_per_day < DATE_BIN_MIN_ROWS_PER_DAY:
    bins = 0
  return DateStats(
    day_mean=day_mean,
    day_scale=day_scale,
    with_time=with_time,
    edges=quantile_edges((days - day_mean) / day_scale, bins),
  )
