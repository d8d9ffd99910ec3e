"""The data gate's thresholds and accepted changes: defaults, per-column settings, parsing.

Plain Python, no TensorFlow: the runners parse `--gate-threshold` and `--accept-changes` with
it before anything heavy loads, and the gate reads the JSON they produce.

A threshold is set for every column (`CHECK=VALUE`) or for one (`COLUMN:CHECK=VALUE`); `off`
turns a check off. Checks, and what their value bounds (docs/nightly.md has the defaults' why):

  drift        a column's distance from the live version's training data: the Jensen-Shannon
               divergence of number columns (TFDV, over quantile buckets; default 0.4), the
               L-infinity distance of text columns (TFDV; default 0.3)
  band         how many standard deviations above its mean over past normal nights a column's
               drift may rise (its own band, `bands`; default 3; `drift` stays the cap, and a
               column's own drift threshold replaces its band)
  scale        how many times larger or smaller a number column's median, mean and spread all
               became (a unit change: metres for miles, cents for dollars)
  shape        how many times better tonight's quantiles fit the reference's after an offset,
               a scale with an offset, or a shift of periodic values than as they are, for the
               change to stop the night and be named (`shape_check`)
  new_values   the share of a text column's cells holding values its known values lack
  missing      how far the share of empty cells may rise, in points of share (0.2: 5% -> 25%)
  label        the L-infinity distance between the label's class shares
  rows         the smallest fraction of the live version's training rows tonight may have
  max_rows     the largest such multiple (off by default: data that grows is no fault)
  leak         how well a column new tonight may answer the label alone (accuracy, R-squared)
               before it counts as a copy of the label
  live_model   how far below always answering the most frequent class the live model's accuracy
               on tonight's rows may fall; for a number label, how far below 0 its R-squared
               (its mean error taken out) may fall
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence

from core.errors import UserInputError

DRIFT = "drift"
BAND = "band"
SCALE = "scale"
SHAPE = "shape"
NEW_VALUES = "new_values"
MISSING = "missing"
LABEL = "label"
ROWS = "rows"
MAX_ROWS = "max_rows"
LIVE_MODEL = "live_model"
LEAK = "leak"

# Defaults, measured on normal nights and faults of several real tables (docs/nightly.md).
DEFAULTS: dict[str, float | None] = {
  DRIFT: 0.4,
  BAND: 3.0,
  SCALE: 2.0,
  SHAPE: 5.0,
  NEW_VALUES: 0.1,
  MISSING: 0.2,
  LABEL: 0.15,
  ROWS: 0.2,
  MAX_ROWS: None,
  LIVE_MODEL: 0.1,
  LEAK: 0.98,
}
# The drift default of text columns, whose L-infinity distance is smaller than a number column's
# divergence for the same change (DEFAULTS[DRIFT] is the numbers' default).
TEXT_DRIFT_DEFAULT = 0.3
# Checks that hold for one column; the others hold for the night's data as a whole.
COLUMN_CHECKS = (DRIFT, BAND, SCALE, SHAPE, NEW_VALUES, MISSING, LEAK)
# What `--accept-changes` names for the dataset checks, and for every change at once.
ROW_COUNT = ":row_count"
REPEATED_DATA = ":repeated_data"
ALL = "all"


class GateSettingsError(UserInputError):
  """A `--gate-threshold` or `--accept-changes` value that cannot be read; names the form."""


@dataclasses.dataclass(frozen=True)
class Thresholds:
  """Every threshold of the gate: the defaults, overridden for all columns or for one.

  Attributes:
    values: check -> threshold for every column (None: the check is off).
    columns: column -> check -> threshold (None: off) for that column alone.
  """

  values: Mapping[str, float | None] = dataclasses.field(default_factory=dict)
  columns: Mapping[str, Mapping[str, float | None]] = dataclasses.field(default_factory=dict)

  def get(self, check: str, column: str | None = None, text: bool = False) -> float | None:
    """The threshold of `check` for `column` (None when the check is off).

    A column's own setting wins, then the setting for every column, then the default (for
    drift, the text default when `text`).
    """
    if column is not None and check in self.columns.get(column, {}):
      return self.columns[column][check]
    if check in self.values:
      return self.values[check]
    return TEXT_DRIFT_DEFAULT if check == DRIFT and text else DEFAULTS[check]

  def is_set(self, check: str, column: str | None = None) -> bool:
    """Whether `check` was set (or turned off) for `column` or for every column."""
    return check in self.values or (column is not None and check in self.columns.get(column, {}))

  def to_json(self) -> str:
    return json.dumps({"values": dict(self.values), "columns": self.columns}, sort_keys=True)

  @classmethod
  def from_json(cls, text: str | None) -> Thresholds:
    if not text:
      return cls()
    data = json.loads(text)
    return cls(data.get("values", {}), data.get("columns", {}))


def parse_thresholds(settings: Sequence[str]) -> Thresholds:
  """Reads `--gate-threshold` values: `CHECK=VALUE` or `COLUMN:CHECK=VALUE`, VALUE a number or off.

  Raises:
    GateSettingsError: naming the setting and the expected form.
  """
  values: dict[str, float | None] = {}
  columns: dict[str, dict[str, float | None]] = {}
  for setting in settings:
    key, sep, raw = setting.rpartition("=")
    column, _, check = key.rpartition(":")
    if not sep or not check:
      raise GateSettingsError(
        f"--gate-threshold {setting!r} is not CHECK=VALUE or COLUMN:CHECK=VALUE "
        f"(e.g. drift=0.4, trip_miles:scale=2, fare:missing=off); checks: {', '.join(DEFAULTS)}."
      )
    if check not in DEFAULTS:
      raise GateSettingsError(
        f"--gate-threshold {setting!r}: unknown check {check!r}; checks are {', '.join(DEFAULTS)}."
      )
    if column and check not in COLUMN_CHECKS:
      raise GateSettingsError(
        f"--gate-threshold {setting!r}: {check} holds for the whole night, not one column; "
        f"pass {check}={raw}. Column checks: {', '.join(COLUMN_CHECKS)}."
      )
    value = _threshold_value(setting, check, raw)
    if column:
      columns.setdefault(column, {})[check] = value
    else:
      values[check] = value
  return Thresholds(values, columns)


def _threshold_value(setting: str, check: str, raw: str) -> float | None:
  if raw.strip().lower() == "off":
    return None
  try:
    value = float(raw)
  except ValueError:
    value = math.nan
  lowest = 1.0 if check in (SCALE, SHAPE, MAX_ROWS) else 0.0
  if not math.isfinite(value) or value < lowest:
    raise GateSettingsError(
      f"--gate-threshold {setting!r}: the value must be a number of at least {lowest:g}, or off."
    )
  if check == LEAK and value > 1.0:
    # An accuracy or R-squared never passes 1: the check would be off without saying so.
    raise GateSettingsError(
      f"--gate-threshold {setting!r}: leak is an accuracy or R-squared; pass a number from 0 "
      "to 1, or off."
    )
  return value


def parse_accepted(values: Iterable[str]) -> list[str]:
  """The columns (and `:row_count`, `:repeated_data`, or `all`) named by `--accept-changes`
  flags, in order.

  Each flag holds one name or a comma-separated list.
  """
  names: list[str] = []
  for value in values:
    for part in value.split(","):
      name = part.strip()
      if not name:
        raise GateSettingsError(
          f"--accept-changes {value!r} names an empty column; pass column names separated by "
          f"commas, {ROW_COUNT} for the row count, {REPEATED_DATA} for a span delivered "
          f"again, or {ALL}."
        )
      if name not in names:
        names.append(name)
  return names


def is_accepted(column: str, accepted: Iterable[str]) -> bool:
  """Whether a change to `column` (or ROW_COUNT, REPEATED_DATA) was accepted."""
  names = set(accepted)
  return ALL in names or column in names
