"""Quantile bin edges: the piecewise-linear encoding of numbers and of dates' days."""

from __future__ import annotations

import numpy as np

# Bin features of all numeric columns together, at most: a wide table gets fewer bins per
# column (64 pixel columns get 4 each), so the first layer stays small.
MAX_BIN_FEATURES = 256


def bins_per_column(bins: int, numeric_columns: int) -> int:
  """`bins`, or fewer when the numeric columns would exceed MAX_BIN_FEATURES (0 below 2)."""
  if not numeric_columns:
    return 0
  per = min(bins, MAX_BIN_FEATURES // numeric_columns)
  return per if per >= 2 else 0


def quantile_edges(values: np.ndarray, bins: int) -> tuple[float, ...]:
  """Increasing bin edges at the quantiles of the present values (() without two of them).

  A column with few distinct values gets an edge at each value, so each step between two
  neighbouring values is a bin of its own.
  """
  values = values[~np.isnan(values)].astype(np.float64)
  if bins < 1 or values.size == 0:
    return ()
  distinct = np.unique(values)
  if distinct.size < 2:
    return ()
  if distinct.size <= bins + 1:
    edges = distinct
  else:
    edges = np.unique(np.quantile(values, np.linspace(0.0, 1.0, bins + 1)))
  return tuple(float(e) for e in edges) if edges.size >= 2 else ()
