"""The sweep's noise band (bench/sweep.py): a paired bootstrap of the eval rows."""

import importlib

import numpy as np
import pytest

from tests.support.cli_runs import REPO_ROOT


@pytest.fixture
def sweep(monkeypatch):
  # The bench scripts import each other by name, as `python bench/quality.py` runs them.
  monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))
  return importlib.import_module("sweep")


def test_a_gap_inside_the_noise_is_not_flagged_and_one_outside_it_is(sweep):
  rng = np.random.default_rng(1)
  y = rng.normal(10, 3, 400)
  base = y + rng.normal(0, 1.0, 400)
  close = y + rng.normal(0, 1.02, 400)  # 2% worse by design: within a 400-row split's noise
  far = y + rng.normal(0, 1.5, 400)  # 50% worse
  gap, band = sweep.gap_and_noise("regression", y, close, base)
  assert abs(gap) < band and not sweep.behind("regression", gap, band)
  gap, band = sweep.gap_and_noise("regression", y, far, base)
  assert gap > 30 and band < 15 and sweep.behind("regression", gap, band)


def test_classification_gaps_are_accuracy_points_and_the_band_shrinks_with_rows(sweep):
  rng = np.random.default_rng(2)
  for rows in (100, 10_000):
    y = rng.integers(0, 3, rows)
    right = np.eye(3)[y]
    wrong = np.eye(3)[(y + 1) % 3]
    ours = np.where(rng.random((rows, 1)) < 0.80, right, wrong)
    best = np.where(rng.random((rows, 1)) < 0.85, right, wrong)
    gap, band = sweep.gap_and_noise("binary", y, ours, best)
    assert -9 < gap < -1  # about 5 points behind
    if rows == 100:
      wide = band
  assert band < wide / 5 and sweep.behind("binary", gap, band)


def test_the_trivial_baseline_and_a_push_worse_than_it_are_in_the_table(sweep):
  quality = importlib.import_module("quality")
  y_train, y_eval = np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0])
  assert quality._trivial("regression", y_train, y_eval)["rmse"] == pytest.approx(np.sqrt(2))
  assert quality._trivial("multiclass", np.array([0, 2, 2]), np.array([2, 1]))["accuracy"] == 0.5
  row = {
    "source": "x/y",
    "task": "regression",
    "rows": {"train": 3, "eval": 2},
    "sweep": {
      "ours": 1.6,
      "trivial": 1.41,
      "pushed": True,
      "pushed_worse_than_trivial": True,
      "baseline": "HGB",
      "best": 1.2,
      "gap": 33.3,
      "band": 50.0,
      "behind": False,
    },
  }
  text = sweep.markdown([{**row, "table": "worse"}])
  assert "| worse | x/y | regression | 3/2 | 1.6 | yes | 1.41 |" in text
  assert "**pushed, worse than trivial**" in text and "trivial baseline's" in text
  assert "**1**" in text
