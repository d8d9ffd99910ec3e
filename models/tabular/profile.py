"""One pass over the training split: what the default model's preprocessing is built from.

Per numeric column: count, missing, mean and standard deviation, and quantile edges from a
uniform sample of rows (for the model's piecewise-linear bins, quantiles.py). Per text column:
value counts, and how the model reads it (text_columns.py): a date, free text (its frequent
words) or categories (its frequent values). The label's values decide the task; a regression
label's moments standardize the target.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from components import model_contract
from components.model_contract import CATEGORICAL, NUMERIC, Column
from core import column_types, defaults, tasks
from models.tabular import read
from models.tabular.date_parts import DateParts, find_date_parts
from models.tabular.quantiles import bins_per_column, quantile_edges
from models.tabular.row_numbers import RowNumbers
from models.tabular.text_columns import (
  DateStats,
  date_stats,
  free_text_min_count,
  is_free_text,
  number_values,
  rows_per_value,
  vocabulary,
  word_counts,
)

# Rows kept (uniformly, by the smallest random keys) for quantiles and date detection.
SAMPLE_ROWS = 20_000
# The row sample's key for a numeric label (no column's name holds a NUL).
_SAMPLED_LABEL = "\0label"
# Text values counted per column before rare ones are dropped from the running counts.
_MAX_COUNTED = 200_000


class TabularInputError(tasks.LabelError):
  """The data, options or module do not fit the tabular model; the message names the fix."""


@dataclasses.dataclass(frozen=True)
class ColumnStats:
  """Training statistics of one column.

  Attributes:
    column: the column.
    count: rows with a value.
    missing: rows without one.
    mean: mean of the values (numeric columns).
    std: standard deviation of the values (numeric columns).
    edges: quantile bin edges, increasing (numeric columns; () when it has one value).
    vocabulary: most frequent values, most frequent first (text columns); for free text, its
      most frequent words.
    distinct: distinct values seen (text columns; a lower bound past _MAX_COUNTED).
    date: set when the text column holds dates.
    free_text: the text column's values mostly do not repeat (see FREE_TEXT_SHARE).
    number: the text column holds numbers written for people ("$1,200", "12%"; see
      `text_columns.number_values`); mean, std and edges are those of their values.
  """

  column: Column
  count: int
  missing: int
  mean: float = 0.0
  std: float = 1.0
  edges: tuple[float, ...] = ()
  vocabulary: tuple[str, ...] = ()
  distinct: int = 0
  date: DateStats | None = None
  free_text: bool = False
  number: bool = False

  @property
  def may_be_missing(self) -> bool:
    # A number read from text may meet a cell that is not one (NA, a word) at any time.
    return self.missing > 0 or self.number


@dataclasses.dataclass(frozen=True)
class Profile:
  """What the model's preprocessing and head are built from.

  Attributes:
    columns: per-column statistics, in input order.
    label: the label's task and classes.
    label_dtype: how the label is stored ('int64', 'float32' or 'string').
    rows: training rows seen.
    label_mean: mean of a number label.
    label_std: standard deviation of a number label.
    file_rows: rows of each training file, in file order.
    holdout_group: (column, dtype) whose values choose the rows held out for early stopping
      (the pipeline's split column; `trainer_api.held_out_groups`), or None: every
      `holdout_every`-th record of each file.
    file_holdout_rows: with `holdout_group`, the held-out rows of each training file.
    date_parts: the dates that number columns spell (year, month, day; date_parts.py).
    readings: the label is a count trained both as classes and as a quantity (readings.py):
      the head then has a unit per class plus one for the quantity.
    row_numbers: the columns left out of the inputs as the table's row numbers, with their
      smallest and largest values (`RowNumbers`).
  """

  columns: tuple[ColumnStats, ...]
  label: tasks.LabelInfo
  label_dtype: str
  rows: int
  label_mean: float = 0.0
  label_std: float = 1.0
  file_rows: tuple[int, ...] = ()
  holdout_group: tuple[str, str] | None = None
  file_holdout_rows: tuple[int, ...] = ()
  date_parts: tuple[DateParts, ...] = ()
  readings: bool = False
  row_numbers: tuple[tuple[str, int, int], ...] = ()

  @property
  def holdout_every(self) -> int:
    """Every how many records of a training file one is held out for early stopping."""
    from components.distributed_trainer import trainer_api

    return trainer_api.holdout_every(self.rows)

  @property
  def holdout_rows(self) -> int:
    """Rows of the held-out slice (every `holdout_every`-th record of each file, or the rows
    of the groups held out)."""
    if self.holdout_group:
      return sum(self.file_holdout_rows)
    return sum(n // self.holdout_every for n in self.file_rows)


class _Moments:
  def __init__(self):
    self.count = 0
    self.total = 0.0
    self.total_sq = 0.0

  def add(self, values: np.ndarray) -> None:
    values = values.astype(np.float64)
    self.count += values.size
    self.total += float(values.sum())
    self.total_sq += float(np.square(values).sum())

  def mean_std(self) -> tuple[float, float]:
    if not self.count:
      return 0.0, 1.0
    mean = self.total / self.count
    var = max(self.total_sq / self.count - mean * mean, 0.0)
    return mean, math.sqrt(var)


def describe_inputs(
  columns: Sequence[ColumnStats],
  shown: int = 4,
  date_parts: Sequence[DateParts] = (),
  row_numbers: Sequence[tuple[str, int, int]] = (),
) -> str:
  """How the model reads its columns, in one line for the summary and the report.

  e.g. "6 numbers; numbers read from text: price; text: state (50 values), homeownership (3);
  free text as words: emp_title (37 words); dates: issue_d (64 bins)". A date spelled by number
  columns is listed among the dates by its columns ("year/month/day (64 bins)"); row numbers
  left out close the line.
  """

  def listed(entries: list[str]) -> str:
    more = f", and {len(entries) - shown} more" if len(entries) > shown else ""
    return ", ".join(entries[:shown]) + more

  def count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"

  numbers = sum(1 for s in columns if s.column.kind == NUMERIC)
  written = [s.column.name for s in columns if s.number]
  text = [
    f"{s.column.name} ({count(len(s.vocabulary), 'value')})" for s in columns if _plain_text(s)
  ]
  words = [f"{s.column.name} ({count(len(s.vocabulary), 'word')})" for s in columns if s.free_text]
  named = [(s.column.name, s.date) for s in columns if s.date] + [
    (d.name, d.stats) for d in date_parts
  ]
  dates = [f"{name} ({count(max(len(stats.edges) - 1, 0), 'bin')})" for name, stats in named]
  parts = [count(numbers, "number")] if numbers else []
  named_parts = (
    ("numbers read from text", written),
    ("text", text),
    ("free text as words", words),
    ("dates", dates),
  )
  for name, entries in named_parts:
    if entries:
      parts.append(f"{name}: {listed(entries)}")
  for name, low, high in row_numbers:
    parts.append(
      f"left out: {name} (row numbers, {low:,} to {high:,}, one per row; rename the column to"
      " learn from it)"
    )
  return "; ".join(parts)


def _plain_text(s: ColumnStats) -> bool:
  return s.column.kind == CATEGORICAL and s.date is None and not s.free_text and not s.number


class _RowSample:
  """A uniform sample of rows without replacement: the rows with the smallest random keys.

  Once the sample is full, a new row can enter only with a key under the largest kept one, so
  only those rows are merged: merging every batch into the sample cost 20 of the 27 s that
  profiling 8 million rows of 65 columns took.
  """

  def __init__(self, size: int, seed: int):
    self._size = size
    self._rng = np.random.default_rng(seed)
    self._keys = np.empty(0)
    self._columns: dict[str, np.ndarray] = {}

  def add(self, columns: dict[str, np.ndarray]) -> None:
    n = len(next(iter(columns.values()))) if columns else 0
    new = self._rng.random(n)
    if len(self._keys) >= self._size:
      enters = new < self._keys.max()
      if not enters.any():
        return
      new = new[enters]
      columns = {name: values[enters] for name, values in columns.items()}
    keys = np.concatenate([self._keys, new])
    merged = {
      name: np.concatenate([self._columns[name], values]) if name in self._columns else values
      for name, values in columns.items()
    }
    if len(keys) > self._size:
      keep = np.argpartition(keys, self._size)[: self._size]
      keys = keys[keep]
      merged = {name: values[keep] for name, values in merged.items()}
    self._keys = keys
    self._columns = merged

  def column(self, name: str) -> np.ndarray:
    return self._columns[name]


def _label_value(value, dtype: str):
  if dtype == column_types.STORED_STRING:
    return value.decode("utf-8", "replace")
  if dtype == column_types.STORED_INT64:
    return int(value)
  return float(value)


def hold_out_by_group(profile: Profile, files: Sequence[str], group: tuple[str, str]) -> Profile:
  """`profile` with its held-out slice chosen by `group` (column, dtype); the slice's rows of
  each of the training `files` are counted here (`read.held_out_mask`)."""
  held = [
    int(read.held_out_mask(path, rows, profile.holdout_every, group).sum())
    for path, rows in zip(files, profile.file_rows, strict=True)
  ]
  return dataclasses.replace(profile, holdout_group=tuple(group), file_holdout_rows=tuple(held))


def profile_data(
  files: Sequence[str],
  columns: Sequence[Column],
  label_key: str,
  label_dtype: str,
  task: str = tasks.AUTO,
  hparams: dict[str, Any] | None = None,
  seed: int = 42,
) -> Profile:
  """One pass over training files: column statistics, label values and the task.

  Args:
    files: gzipped TFRecord files of tf.Examples.
    columns: the model's columns.
    label_key: the label column.
    label_dtype: how the label is stored.
    task: tasks.AUTO or a task name (the pipeline's `--task`).
    hparams: max_vocabulary, min_category_count, max_classes and numeric_bins are read.
    seed: the row sample's seed.

  Returns:
    The Profile.

  Raises:
    TabularInputError: for an empty training split.
    tasks.LabelError: for a label that cannot be learned as asked.
  """
  hp = dict(hparams or {})
  tally = _Tally(columns, label_dtype, int(hp.get("max_classes", defaults.MAX_CLASSES)), seed)
  file_rows = []
  for path in files:
    file_rows.append(0)
    for features, label in read.file_batches(path, columns, label_key, label_dtype):
      file_rows[-1] += len(label)
      tally.add(features, label)
  if tally.rows == 0:
    raise TabularInputError(
      "the training split has no rows; give the ExampleGen more data or another split ratio."
    )
  label = tally.label_info(label_key, task)
  label_mean, label_std = tally.label_moments.mean_std()
  row_numbers = tally.row_numbers.found(tally.sample.column, tally.rows)
  if len(row_numbers) == len(columns):
    row_numbers = ()  # a model needs an input
  left_out = {name for name, _, _ in row_numbers}
  numbers = {
    c.name: tally.sample.column(c.name)
    for c in columns
    if c.kind == NUMERIC and c.name not in left_out
  }
  return Profile(
    tuple(s for s in tally.column_stats(hp, label.task) if s.column.name not in left_out),
    label,
    label_dtype,
    tally.rows,
    label_mean,
    label_std or 1.0,
    tuple(file_rows),
    date_parts=find_date_parts(numbers, int(hp.get("numeric_bins", 16)), tally.rows),
    row_numbers=row_numbers,
  )


class _Tally:
  """What profile_data adds up batch by batch, and the statistics it comes to at the end."""

  def __init__(self, columns: Sequence[Column], label_dtype: str, max_classes: int, seed: int):
    self.columns = columns
    self.label_dtype = label_dtype
    self.max_classes = max_classes
    self.rows = 0
    self.numeric = {c.name: _Moments() for c in columns if c.kind == NUMERIC}
    self.missing = {c.name: 0 for c in columns}
    self.counts: dict[str, Counter] = {c.name: Counter() for c in columns if c.kind == CATEGORICAL}
    self.sample = _RowSample(SAMPLE_ROWS, seed)
    self.label_values: set = set()
    # More distinct label values than max_classes: only max_classes + 1 of them are kept.
    self.label_overflow = False
    self.label_moments = _Moments()
    self._position = {c.name: i for i, c in enumerate(model_contract.numeric_columns(columns))}
    self.row_numbers = RowNumbers(columns)

  def add(self, features: dict[str, np.ndarray], label: np.ndarray) -> None:
    """Counts one parsed batch: model inputs by name, and the raw labels."""
    self.rows += len(label)
    self._add_columns(features, label)
    self._add_label(label)

  def _add_columns(self, features: dict[str, np.ndarray], label: np.ndarray) -> None:
    batch: dict[str, np.ndarray] = {}
    for c in self.columns:
      if c.kind == NUMERIC:
        values = features[c.input_name][:, self._position[c.name]]
        present = ~np.isnan(values)
        self.numeric[c.name].add(values[present])
        self.row_numbers.add(c.name, values, present)
      else:
        values = features[c.input_name][:, 0]
        present = values != b""
        uniques, freq = np.unique(values[present], return_counts=True)
        counts = self.counts[c.name]
        counts.update(dict(zip(uniques.tolist(), freq.tolist(), strict=True)))
        if len(counts) > _MAX_COUNTED:
          self.counts[c.name] = Counter({v: n for v, n in counts.items() if n > 1})
      self.missing[c.name] += int((~present).sum())
      batch[c.name] = values
    if self.label_dtype != column_types.STORED_STRING:
      batch[_SAMPLED_LABEL] = label.astype(np.float64)
    self.sample.add(batch)

  def _add_label(self, label: np.ndarray) -> None:
    if self.label_dtype == column_types.STORED_STRING:
      label = label[label != b""]
    else:
      if self.label_dtype == column_types.STORED_FLOAT32:
        label = label[~np.isnan(label)]
      self.label_moments.add(label)
    if not self.label_overflow:
      self.label_values.update(np.unique(label).tolist())
      self.label_overflow = len(self.label_values) > self.max_classes
      if self.label_overflow:
        self.label_values = set(sorted(self.label_values)[: self.max_classes + 1])

  def _embedded_min_count(self, name: str, present: int) -> int:
    """The cells an embedded column's value needs for a slot, with a regression label: the
    sampled rows' `rows_per_value`, at most free text's count for `present` cells."""
    needed = rows_per_value(self.sample.column(name), self.sample.column(_SAMPLED_LABEL))
    ceiling = free_text_min_count(present)
    return ceiling if needed >= ceiling else max(2, math.ceil(needed))

  def label_info(self, label_key: str, task: str) -> tasks.LabelInfo:
    """The label's task (`task`, or inferred from its values) and classes."""
    kind = column_types.STORED_TO_CSV[self.label_dtype]
    distinct = sorted(_label_value(v, self.label_dtype) for v in self.label_values)
    count = len(distinct) + (1 if self.label_overflow else 0)
    decided = tasks.infer_task(
      label_key, kind, distinct, count, task, self.max_classes, rows="the train split"
    )
    return tasks.label_info(label_key, decided, distinct)

  def column_stats(self, hp: dict[str, Any], task: str) -> tuple[ColumnStats, ...]:
    """Each column's ColumnStats, in input order, for a label of `task`."""
    stats = []
    texts = [c.name for c in self.columns if c.kind == CATEGORICAL]
    read = {name: number_values(self.sample.column(name)) for name in texts}
    written = {name: numbers for name, numbers in read.items() if numbers is not None}
    bins = bins_per_column(int(hp.get("numeric_bins", 16)), len(self.numeric) + len(written))
    for c in self.columns:
      present = self.rows - self.missing[c.name]
      if c.kind == NUMERIC:
        mean, std = self.numeric[c.name].mean_std()
        edges = quantile_edges(self.sample.column(c.name), bins)
        stats.append(ColumnStats(c, present, self.missing[c.name], mean, std or 1.0, edges=edges))
        continue
      numbers = written.get(c.name)
      if numbers is not None:
        mean, std = float(numbers.mean()), float(numbers.std()) or 1.0
        edges = quantile_edges(numbers, bins)
        stats.append(ColumnStats(c, present, self.missing[c.name], mean, std, edges, number=True))
        continue
      date = date_stats(self.sample.column(c.name), int(hp.get("numeric_bins", 16)), present)
      vocab = ()
      distinct = len(self.counts[c.name])
      free_text = date is None and is_free_text(distinct, present)
      if date is None:
        min_count = int(hp.get("min_category_count", 2))
        counts = self.counts[c.name]
        if free_text:
          words_min = hp.get("free_text_min_count")
          words_min = free_text_min_count(present) if words_min is None else int(words_min)
          min_count = max(min_count, words_min)
          counts = word_counts(counts)
        max_size = int(hp.get("max_vocabulary", 1000))
        vocab = vocabulary(counts, max_size, min_count)
        embedded = not free_text and len(vocab) > int(hp.get("one_hot_max", 32))
        embedded_min = hp.get("embedding_min_count")
        if embedded and embedded_min is None and task == tasks.REGRESSION:
          embedded_min = self._embedded_min_count(c.name, present)
        if embedded and embedded_min is not None:
          # Only values seen often enough to learn more than their rows' noise.
          vocab = vocabulary(counts, max_size, max(min_count, int(embedded_min)))
      stats.append(
        ColumnStats(
          c,
          present,
          self.missing[c.name],
          vocabulary=vocab,
          distinct=distinct,
          date=date,
          free_text=free_text,
        )
      )
    return tuple(stats)
