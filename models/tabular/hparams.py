"""The default model's hyper-parameters: their defaults, their checks, the width rule.

Plain Python: `pipeline/cli/resolve.py` checks --hparams with it before TensorFlow loads.
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from core import defaults
from models.tabular.profile import TabularInputError

DEFAULT_HPARAMS: dict[str, Any] = {
  # None: sized to the training rows (`hidden_units_for`).
  "hidden_units": None,
  "num_layers": 2,
  # None: sized to the training plan (`learning_rate_for`).
  "learning_rate": None,
  "dropout": 0.0,
  # Quantile bins per numeric column (piecewise-linear encoding); 0 turns them off.
  "numeric_bins": 16,
  # Text values seen fewer times than this in training go to the out-of-vocabulary slot.
  "min_category_count": 2,
  "max_vocabulary": 1000,
  # Free text (a column whose values mostly do not repeat: job titles, names) is read as words
  # and keeps only the words found in at least this many cells; the rest share one slot. None:
  # 0.2 x the square root of the column's cells (`profile.free_text_min_count`), e.g. 4 in a
  # table of 400 rows and 19 in one of 9,000.
  "free_text_min_count": None,
  # A text column with more values than one_hot_max is embedded, and keeps only the values seen
  # in at least this many cells (the rest share one slot). None: for a regression label, the
  # rows a value needs for its mean label to be more signal than noise
  # (`text_columns.rows_per_value` on the profile's row sample), at most free text's count, 0.2
  # x the square root of the column's cells (32 in a table of 26,000 rows). A value seen a few
  # times would learn its rows' noise (openintro's nycflights: 6.6% behind
  # HistGradientBoosting's RMSE with plane tail numbers seen twice, 3.4% seen 32 times), while a
  # country in a panel of years names its label (openintro's hfi: a mean squared error 9 times
  # as large with countries seen under 7 times in one slot). For classes, min_category_count:
  # a rare value can name its class (seattlepets' breeds: 0.9 points lost with a count of 41).
  "embedding_min_count": None,
  # Text columns with more values than this are embedded instead of one-hot encoded.
  "one_hot_max": 32,
  "max_classes": defaults.MAX_CLASSES,
  # Epochs whose held-out losses are averaged for early stopping and the epoch kept (1: each
  # epoch's own). Averaging 5, on the sweep's tables with under 100 held-out rows, left mpg,
  # fastfood and epa2021 where they were and cost galton 1.8% RMSE, so it is not the default.
  "stopping_window": 1,
  # Networks trained from different seeds whose outputs are averaged. None: ENSEMBLE_MEMBERS
  # under ENSEMBLE_MAX_ROWS training rows, 1 from there and with --train-steps
  # (`ensemble_size_for`).
  "ensemble_size": None,
  # 1: an ensemble also trains a linear model (no hidden layer, no quantile bins on numbers) on
  # the same inputs, and the held-out slice chooses its share of the output (`LINEAR_SHARES`);
  # 0: the networks alone.
  "linear_member": 1,
}

# The networks' learning rate, and the rate where a data-sized plan has fewer than
# SHORT_PLAN_STEPS steps per network: a table of under about 640 training rows, whose batches of
# 64 make under 10 steps an epoch, so that MAX_EPOCHS stop it within 2,000 steps. At 1e-3 the
# three networks of palmerpenguins (243 rows fit, 800 steps) all ran to epoch 200 with the
# held-out loss still falling, and missed one more eval row than HistGradientBoosting; at 3e-3
# they stopped early at epochs 37 to 87 and matched it (600 epochs at 1e-3 matched it too, in
# 3 times the time of 200).
LEARNING_RATE = 1e-3
SHORT_PLAN_LEARNING_RATE = 3e-3
SHORT_PLAN_STEPS = 2_000
# The batch LEARNING_RATE is for. A larger automatic batch (`plan.auto_batch_size`, from about
# 260,000 training rows) takes LEARNING_RATE x sqrt(batch / BASE_BATCH), Adam's square-root
# rule, reached by a linear warm-up over WARMUP_SHARE of the plan's steps (at most one epoch).
BASE_BATCH = 1024
WARMUP_SHARE = 0.05
# Training rows under which a table is small: a narrower network (64 units).
SMALL_TABLE_ROWS = 2_000
# Training rows from which the network is widest (256 units).
LARGE_TABLE_ROWS = 20_000
# The members of the ensemble under ENSEMBLE_MAX_ROWS training rows; from there the network
# trains alone, so that a million rows train in one network's time. On 12 of the sweep's small
# tables, the average of 3 seeds' predictions was closer to the better baseline than the mean of
# the seeds' own scores on 11; on the 13 sweep tables of 2,000 to 20,000 training rows it took
# those behind beyond their noise from 2 to 0, and on the 3 of 20,000 to 50,000 from 1 to 0 (see
# docs/your-data.md).
ENSEMBLE_MEMBERS = 3
ENSEMBLE_MAX_ROWS = 50_000
# The linear member's shares of an ensemble's output that the held-out slice chooses from (the
# networks share the rest equally), and its learning rate: at the networks' 1e-3 its held-out
# loss was still falling after 200 epochs on ISLR's Carseats.
LINEAR_SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)
LINEAR_LEARNING_RATE = 1e-2


def check_hparams(hparams: dict[str, Any], allow_extra: bool = False) -> dict[str, Any]:
  """The hyper-parameters with their defaults, checked.

  Args:
    hparams: --hparams (and the Tuner's values).
    allow_extra: accept names the default model does not know (a build_model module's network
      reads its own).

  Raises:
    TabularInputError: for an unknown name or a value of the wrong kind or range.
  """
  known = sorted([*DEFAULT_HPARAMS, "batch_size", "max_epochs"])
  unknown = sorted(set(hparams) - set(known))
  if unknown and not allow_extra:
    close = [m for name in unknown for m in difflib.get_close_matches(name, known, n=1)]
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise TabularInputError(
      f"unknown hyper-parameter(s) {', '.join(unknown)}{hint}; use {', '.join(known)}."
    )
  out = {**DEFAULT_HPARAMS, **hparams}
  for low, names in (
    (
      1,
      (
        "hidden_units",
        "num_layers",
        "max_vocabulary",
        "max_classes",
        "stopping_window",
        "ensemble_size",
      ),
    ),
    (
      0,
      (
        "numeric_bins",
        "min_category_count",
        "free_text_min_count",
        "embedding_min_count",
        "one_hot_max",
        "linear_member",
      ),
    ),
  ):
    for name in names:
      # None stays "sized to the data" where that is the default (hidden_units, the free-text
      # word and embedded value counts, the ensemble size).
      if out[name] is not None or DEFAULT_HPARAMS[name] is not None:
        _check_number(name, out[name], int, low)
  for name in ("batch_size", "max_epochs"):
    if name in out:
      _check_number(name, out[name], int, 1)
  if int(out["linear_member"]) > 1:
    raise TabularInputError(
      f"hyper-parameter linear_member={out['linear_member']} must be 0 (no linear member) or 1, "
      f"e.g. {_example('linear_member')}."
    )
  if out["learning_rate"] is not None:
    _check_number("learning_rate", out["learning_rate"], float, 0, exclusive=True)
  _check_number("dropout", out["dropout"], float, 0)
  if float(out["dropout"]) >= 1:
    raise TabularInputError(
      f"hyper-parameter dropout={out['dropout']} must be below 1, e.g. {_example('dropout')}."
    )
  return out


# Values shown in messages as the expected form, where the default is not a good example.
_EXAMPLES = {
  "hidden_units": 128,
  "batch_size": 256,
  "max_epochs": 100,
  "dropout": 0.1,
  "free_text_min_count": 20,
  "embedding_min_count": 20,
  "stopping_window": 5,
  "ensemble_size": 1,
  "linear_member": 0,
  "learning_rate": 0.001,
}


def _example(name: str) -> str:
  return f"--hparams {name}={_EXAMPLES.get(name, DEFAULT_HPARAMS.get(name))}"


def _check_number(name: str, value: Any, kind: type, low: float, exclusive: bool = False) -> None:
  """Refuses a value of the wrong kind or range, showing the form that works."""
  bound = f"{'above' if exclusive else 'at least'} {low}"
  of_bound = bound if exclusive else f"of {bound}"
  try:
    number = kind(value)
    whole = kind is not int or float(value) == number
  except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
    number, whole = None, False
  if not whole:
    kind_name, form = ("an integer", "a whole number") if kind is int else ("a number", "a number")
    raise TabularInputError(
      f"hyper-parameter {name}={value!r} is not {kind_name}; pass {form} {of_bound}, e.g. "
      f"{_example(name)}."
    )
  if not math.isfinite(number) or number < low or (exclusive and number == low):
    finite = "" if math.isfinite(number) else "a finite number "
    raise TabularInputError(
      f"hyper-parameter {name}={value!r} must be {finite}{bound}, e.g. {_example(name)}."
    )


def learning_rate_for(
  hparams: dict[str, Any], plan_steps: int | None, batch_size: int = BASE_BATCH
) -> float:
  """The networks' Adam learning rate: hparams learning_rate where given; else LEARNING_RATE
  scaled up for a batch over BASE_BATCH; else SHORT_PLAN_LEARNING_RATE where the data-sized
  plan (`plan_steps`: its epochs times its steps per epoch; None where the run sets them, with
  --train-steps or max_epochs) has fewer than SHORT_PLAN_STEPS steps, else LEARNING_RATE."""
  if hparams.get("learning_rate") is not None:
    return float(hparams["learning_rate"])
  if batch_size > BASE_BATCH:
    return LEARNING_RATE * math.sqrt(batch_size / BASE_BATCH)
  if plan_steps is not None and plan_steps < SHORT_PLAN_STEPS:
    return SHORT_PLAN_LEARNING_RATE
  return LEARNING_RATE


def warmup_steps_for(hparams: dict[str, Any], batch_size: int, steps: int, per_epoch: int) -> int:
  """Steps of the linear warm-up to a scaled learning rate (`learning_rate_for`): 0 where the
  rate is not scaled (a batch of at most BASE_BATCH, or a rate given in hparams)."""
  if hparams.get("learning_rate") is not None or batch_size <= BASE_BATCH:
    return 0
  return max(1, min(per_epoch, int(steps * WARMUP_SHARE)))


def hidden_units_for(rows: int) -> int:
  """Width of the hidden layers for a training set: 64 under 2,000 rows, 128 under 20,000,
  256 from there, so that small tables do not get more capacity than their rows support."""
  if rows < SMALL_TABLE_ROWS:
    return 64
  return 128 if rows < LARGE_TABLE_ROWS else 256


def ensemble_size_for(hparams: dict[str, Any], rows: int, fixed_steps: bool) -> int:
  """How many networks the default model averages: hparams ensemble_size where given, else
  ENSEMBLE_MEMBERS for a table under ENSEMBLE_MAX_ROWS training rows whose training is sized
  to the data, and 1 otherwise (--train-steps asks for exactly that many steps)."""
  if hparams.get("ensemble_size") is not None:
    return int(hparams["ensemble_size"])
  return ENSEMBLE_MEMBERS if rows < ENSEMBLE_MAX_ROWS and not fixed_steps else 1
