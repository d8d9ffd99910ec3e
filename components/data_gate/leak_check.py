"""A column new tonight that gives the label away: a copy of it, or a field written after it.

An upstream change that adds a column filled after the outcome (a refund flag beside a fraud
label, the final price beside an estimate) passes every check that compares one column with
itself: a new column is only noted. The model trained on it then scores nearly perfectly on
tonight's eval rows, is blessed over the live version, and is pushed with a serving contract
that asks for a value no request can carry before the outcome is known.

So each column new tonight is scored alone against the label, on the train split: fitted on
every other row and scored on the rest, as a lookup of the label's most frequent class (or its
mean) per value, numbers cut into quantile bins; for a number label and a number column, also
the rank correlation. A column that alone reaches the `leak` threshold (default 0.98: accuracy,
R-squared or the rank correlation's square) where the most frequent class stays below it
stops the night. A column that is new and merely useful stays information, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from components import columnar
from components.data_gate import report as gate_report
from components.data_gate import thresholds as th

# Quantile bins of a number column in the lookup.
_BINS = 64
# Fewer labelled rows than this: no score (a lookup on a handful of rows is noise).
_MIN_ROWS = 40


def read_columns(
  files: Sequence[str], names: Sequence[str], max_rows: int | None = None
) -> dict[str, np.ndarray]:
  """The named columns of a split's columnar copy (`columnar.complete_files`), as numpy arrays:
  numbers as float64 with NaN for empty cells, text as objects with None; the first `max_rows`
  rows or more (whole record batches), or every row."""
  import pyarrow as pa

  parts: dict[str, list] = {n: [] for n in names}
  rows = 0
  batches = (b for path in files for b in columnar.file_batches(columnar.open_file(path)))
  for batch in batches:
    for name in names:
      column = batch.column(name) if name in batch.schema.names else pa.nulls(batch.num_rows)
      parts[name].append(column)
    rows += batch.num_rows
    if max_rows is not None and rows >= max_rows:
      break
  out = {}
  for name, arrays in parts.items():
    column = pa.concat_arrays(arrays) if arrays else pa.array([])
    if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
      out[name] = column.cast(pa.float64()).to_numpy(zero_copy_only=False)
    else:
      out[name] = np.asarray(column.to_pylist(), dtype=object)
  return out


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Integer codes of a column's values (numbers in quantile bins), and the mask of cells that
  hold one."""
  if values.dtype == object:
    present = np.array([v is not None for v in values], dtype=bool)
    filled = np.array([v if v is not None else b"" for v in values], dtype=object)
    _, codes = np.unique(filled, return_inverse=True)
    return codes, present
  present = ~np.isnan(values)
  if not present.any():
    return np.zeros(len(values), dtype=np.int64), present
  filled = np.where(present, values, np.nanmin(values))
  distinct = np.unique(values[present])
  if len(distinct) <= _BINS:
    return np.searchsorted(distinct, filled), present
  # Quantile bins by each value's first place in sorted order: a value held by many rows (zero)
  # keeps a bin of its own, apart from the values next to it.
  ordered = np.sort(values[present])
  return np.searchsorted(ordered, filled, side="left") * _BINS // len(ordered), present


def lookup_score(
  column: np.ndarray, label: np.ndarray, classification: bool
) -> tuple[float, float] | None:
  """How well the column alone answers the label on held-out rows, and the same score of always
  answering the most frequent class (or the mean: 0 for R-squared).

  Rows alternate between fitting the lookup and scoring it; a value the fitting rows never had
  gets the fitting rows' overall answer. None under _MIN_ROWS labelled rows.
  """
  codes, present = _codes(column)
  if classification:
    labels, known = _codes(label)
  else:
    labels = label.astype(np.float64)
    known = ~np.isnan(labels)
  keep = known
  if keep.sum() < _MIN_ROWS:
    return None
  # An empty cell is a value of its own: the lookup's code past every other.
  codes = np.where(present, codes, codes.max(initial=0) + 1)[keep]
  y = labels[keep]
  fit = np.arange(len(y)) % 2 == 0
  score = ~fit
  values = codes.max(initial=0) + 1
  if classification:
    classes = int(y.max()) + 1
    table = np.zeros((values, classes))
    np.add.at(table, (codes[fit], y[fit]), 1)
    overall = int(np.bincount(y[fit], minlength=classes).argmax())
    seen = table.sum(1) > 0
    answer = np.where(seen, table.argmax(1), overall)
    accuracy = float(np.mean(answer[codes[score]] == y[score]))
    majority = float(np.mean(y[score] == overall))
    return accuracy, majority
  sums = np.bincount(codes[fit], weights=y[fit], minlength=values)
  counts = np.bincount(codes[fit], minlength=values)
  mean = float(y[fit].mean())
  answer = np.where(counts > 0, sums / np.maximum(counts, 1), mean)
  spread = float(np.mean((y[score] - y[score].mean()) ** 2))
  if not spread > 0:
    return None
  r2 = 1.0 - float(np.mean((answer[codes[score]] - y[score]) ** 2)) / spread
  if column.dtype != object and present.sum() >= _MIN_ROWS:
    both = present[keep]
    ranks = [np.argsort(np.argsort(a[both])) for a in (column[keep], y)]
    rho = float(np.corrcoef(*ranks)[0, 1]) if both.sum() > 2 else 0.0
    r2 = max(r2, rho * rho if np.isfinite(rho) else 0.0)
  return r2, 0.0


def findings(
  columns: dict[str, np.ndarray],
  *,
  label_key: str,
  new_columns: Sequence[str],
  classification: bool,
  thresholds: th.Thresholds,
  first_night: bool = False,
) -> list[gate_report.Finding]:
  """A STOP finding for each new column that alone gives the label away; on a first night
  (nothing live, `new_columns` every column), an INFO finding, which stops nothing: no version
  says which columns are the model's own."""
  out = []
  label = columns[label_key]
  for name in new_columns:
    bound = thresholds.get(th.LEAK, name)
    if bound is None:
      continue
    scored = lookup_score(columns[name], label, classification)
    if scored is None:
      continue
    value, baseline = scored
    if value < bound or baseline >= bound:
      continue
    what = (
      f"right on {100 * value:.1f}% of held-out rows (the most frequent class: "
      f"{100 * baseline:.1f}%)"
      if classification
      else f"with an R-squared of {value:.3f} on held-out rows"
    )
    said = f"alone it answers {label_key!r} {what} (>= {bound:g}); a copy of the label, or a "
    said += "field written after the outcome? A model that reads it fails where requests "
    said += "cannot send it"
    if first_night:
      text = f"{name!r} gives the label away: {said}; --exclude-columns {name} leaves it out"
      out.append(gate_report.Finding(name, th.LEAK, gate_report.INFO, text, value, bound))
      continue
    text = f"{name!r} is new tonight and gives the label away: {said}"
    out.append(gate_report.Finding(name, th.LEAK, gate_report.STOP, text, value, bound))
  return out


def new_columns(
  tonight_schema: Any, reference_schema: Any, label_key: str, excluded: set[str]
) -> list[str]:
  """The columns of tonight's schema the live version's data did not have, bar the label and
  the columns left out."""
  before = {f.name for f in reference_schema.feature}
  return sorted(
    f.name
    for f in tonight_schema.feature
    if f.name not in before and f.name != label_key and f.name not in excluded
  )
