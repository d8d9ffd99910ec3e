"""Each column's band of normal drift, and changes that keep a column's shape: synthetic columns,
no TensorFlow."""

from __future__ import annotations

import numpy as np
import pytest

from components.data_gate import bands, column_checks, shape_check
from components.data_gate import stats_view as sv
from components.data_gate import thresholds as th
from core.column_types import SCHEMA_FLOAT, SCHEMA_INT

JSD = "Jensen-Shannon divergence"
LINF = "L-infinity distance"


def _night(drift: dict[str, float], passed: bool = True, statistic: str = JSD, **extra) -> dict:
  return {
    "passed": passed,
    "compared": True,
    "drift": {c: {"statistic": statistic, "value": v, "threshold": 0.4} for c, v in drift.items()},
    "findings": [],
    **extra,
  }


def _measured(value: float, statistic: str = JSD, threshold: float = 0.4) -> dict:
  return {"statistic": statistic, "value": value, "threshold": threshold}


# ----------------------------------------------------------------------------- the band rule


def test_a_low_noise_column_moving_50_times_its_normal_amount_stops_below_the_fixed_bound():
  rng = np.random.default_rng(0)
  history = [_night({"fare": 0.001 + rng.uniform(-2e-4, 2e-4)}) for _ in range(8)]
  drift = {"fare": _measured(0.05)}
  failing = bands.apply(drift, bands.normal_history(history), th.Thresholds())
  assert failing == {"fare"}
  assert drift["fare"]["threshold"] < 0.05
  assert drift["fare"]["band"]["cap"] == 0.4
  assert drift["fare"]["band"]["nights"] == 8
  assert "its band" in bands.describe(drift["fare"])


def test_a_column_with_large_but_steady_natural_drift_passes_every_night():
  """Taxi pickup latitude moves about 0.22 each night: its band sits around it, under the cap."""
  rng = np.random.default_rng(1)
  values = 0.22 + rng.normal(0, 0.02, 40)
  history = []
  for value in values:
    drift = {"pickup_latitude": _measured(float(value))}
    failing = bands.apply(drift, bands.normal_history(history), th.Thresholds())
    assert not failing, (len(history), value, drift)
    history.append({"passed": True, "drift": drift, "findings": []})
  assert history[-1]["drift"]["pickup_latitude"]["band"]["mean"] == pytest.approx(0.22, abs=0.02)


def test_the_fixed_bound_applies_until_five_normal_nights_hold_the_column():
  history = [_night({"fare": 0.001}) for _ in range(bands.MIN_NIGHTS - 1)]
  history += [_night({"fare": 0.001}, passed=False), _night({"other": 0.001})]
  drift = {"fare": _measured(0.05)}
  assert not bands.apply(drift, bands.normal_history(history), th.Thresholds())
  assert "band" not in drift["fare"] and drift["fare"]["threshold"] == 0.4
  assert bands.describe(drift["fare"]) == "0.4"


def test_the_band_never_exceeds_the_fixed_bound_which_stays_a_cap():
  history = [_night({"lat": v}) for v in (0.30, 0.38, 0.35, 0.33, 0.39, 0.36)]
  drift = {"lat": _measured(0.45)}
  assert bands.apply(drift, history, th.Thresholds()) == {"lat"}
  assert drift["lat"]["threshold"] == 0.4


def test_a_constant_history_does_not_make_every_wobble_an_alarm():
  history = [_night({"code": 0.0}) for _ in range(10)]
  drift = {"code": _measured(0.01)}
  assert not bands.apply(drift, history, th.Thresholds())
  assert drift["code"]["threshold"] == pytest.approx(3 * bands.ABSOLUTE_STD_FLOOR)


def test_a_columns_own_drift_threshold_or_band_off_replaces_its_band():
  history = [_night({"fare": 0.001, "tips": 0.001}) for _ in range(8)]
  settings = th.parse_thresholds(["fare:drift=0.4", "tips:band=off"])
  drift = {"fare": _measured(0.05), "tips": _measured(0.05)}
  assert not bands.apply(drift, history, settings)
  assert "band" not in drift["fare"] and "band" not in drift["tips"]


def test_the_band_counts_only_the_same_statistic_and_no_night_that_accepted_the_column():
  accepted = {"findings": [{"column": "fare", "accepted": True}]}
  history = [_night({"fare": 0.001}) for _ in range(4)]
  history += [_night({"fare": 0.3}, **accepted), _night({"fare": 0.002}, statistic=LINF)]
  assert bands.history_values(history, "fare", JSD) == [0.001] * 4
  assert bands.learn(history, "fare", JSD, th.Thresholds(), 0.4) is None


# ----------------------------------------------------------------------------- shape changes


def _stats(values, name="x", kind=SCHEMA_FLOAT, buckets=10) -> sv.ColumnStats:
  """A column's statistics as TFDV summarises it: equal-mass quantile buckets."""
  v = np.asarray(values, dtype=np.float64)
  edges = np.quantile(v, np.linspace(0, 1, buckets + 1))
  quantiles = tuple(
    (float(edges[i]), float(edges[i + 1]), len(v) / buckets) for i in range(buckets)
  )
  return sv.ColumnStats(
    name, kind, len(v), len(v), quantiles, float(np.median(v)), float(v.mean()), float(v.std())
  )


@pytest.fixture(scope="module")
def temperatures():
  """Reference and normal nights of a skewed column (a gamma, like a duration or a price)."""
  rng = np.random.default_rng(0)
  return rng.gamma(3, 4, 5000), [rng.gamma(3, 4, 5000) for _ in range(6)], rng


def _shape(name, now, ref, read=None):
  return shape_check.findings(name, now, ref, th.Thresholds(), read)


@pytest.mark.parametrize(
  "change, words",
  [
    (lambda v: v + 8, "the reference plus 8"),
    (lambda v: v * 1.8 + 32, "the reference x 1.8"),
  ],
)
def test_an_offset_and_a_scale_with_an_offset_stop_and_are_named(temperatures, change, words):
  ref, nights, _ = temperatures
  found = _shape("temp", _stats(change(nights[0])), _stats(ref))
  assert len(found) == 1 and found[0].kind == "stop" and found[0].check == th.SHAPE
  assert words[:-1] in found[0].text, found[0].text
  assert found[0].value >= found[0].threshold


def test_normal_nights_and_natural_drift_keep_their_shape(temperatures):
  ref, nights, rng = temperatures
  for night in [*nights, rng.gamma(3.3, 4, 5000), rng.gamma(3, 4.2, 5000)]:
    assert _shape("temp", _stats(night), _stats(ref)) == []


def test_a_shifted_hour_of_day_stops_and_names_the_period():
  rng = np.random.default_rng(2)
  weights = np.r_[np.linspace(1, 3, 12), np.linspace(3, 1, 12)] ** 2
  weights /= weights.sum()
  hours = rng.choice(24, 8000, p=weights)
  ref = _stats(hours, "trip_start_hour", SCHEMA_INT)
  assert shape_check.period("trip_start_hour", ref, ref) == (24, 0)
  normal = _stats(rng.choice(24, 8000, p=weights), "trip_start_hour", SCHEMA_INT)
  assert _shape("trip_start_hour", normal, ref) == []
  shifted = _stats((rng.choice(24, 8000, p=weights) + 8) % 24, "trip_start_hour", SCHEMA_INT)
  found = _shape("trip_start_hour", shifted, ref)
  assert len(found) == 1 and "(period 24)" in found[0].text, found
  # A column the live model does not read only informs.
  assert _shape("trip_start_hour", shifted, ref, read={"fare"})[0].kind == "info"


def test_periods_are_told_by_name_and_range():
  days = _stats(np.arange(1, 8).repeat(10), "trip_start_day", SCHEMA_INT)
  month_days = _stats(np.arange(1, 32).repeat(10), "day", SCHEMA_INT)
  assert shape_check.period("trip_start_day", days, days) == (7, 1)
  assert shape_check.period("day", month_days, month_days) is None
  assert shape_check.period("fare", days, days) is None


def test_the_shape_check_can_be_turned_off_per_column(temperatures):
  ref, nights, _ = temperatures
  settings = th.parse_thresholds(["temp:shape=off"])
  assert shape_check.findings("temp", _stats(nights[0] + 8), _stats(ref), settings, None) == []
  with pytest.raises(th.GateSettingsError):
    th.parse_thresholds(["shape=0.5"])


def test_a_pure_scale_of_a_heavy_tailed_column_is_named_though_under_the_unit_bound():
  """x 1.8 + 32 on amounts in the tens of thousands is a pure x 1.8; on a column from near zero
  with a long tail the quantiles are then under 0.25 of the spread apart, but 0.44 of their
  size; a normal night is neither."""
  rng = np.random.default_rng(3)
  ref, night = rng.exponential(20000, 5000), rng.exponential(20000, 5000)
  change = shape_check.linear_change(_stats(night * 1.8 + 32), _stats(ref))
  assert change.kind == shape_check.SCALE and change.as_is < 0.25 < change.relative
  found = _shape("credit", _stats(night * 1.8 + 32), _stats(ref))
  assert len(found) == 1 and found[0].kind == "stop", found
  assert "looks like the reference x 1.8" in found[0].text and "of its size" in found[0].text
  assert _shape("credit", _stats(night), _stats(ref)) == []
  # A small natural change of scale is no clear misfit either way.
  assert _shape("credit", _stats(night * 1.05), _stats(ref)) == []


# ----------------------------------------------------------------------------- new values


def _text(counts: dict[str, int], name: str = "model") -> sv.ColumnStats:
  total = sum(counts.values())
  return sv.ColumnStats(name, "BYTES", total, total, top=counts)


_UNEXPECTED = {"ENUM_TYPE_UNEXPECTED_STRING_VALUES"}


def _new_values(now, ref):
  return column_checks.column_findings(
    "model",
    now,
    ref,
    {},
    {},
    _UNEXPECTED,
    "Examples contain values missing from the schema: x (~12%).",
    th.Thresholds(),
  )


def test_new_values_within_the_unseen_share_a_new_sample_expects_only_inform():
  """38 car models in 117 rows, 12 seen once: a Good-Turing unseen share of about 10%, so 14%
  new cells on a 91-row night is sampling; a renamed column is not."""
  ref = _text({**{f"m{i}": 1 for i in range(12)}, **{f"c{i}": 4 for i in range(26)}, "x": 1})
  assert column_checks.unseen_share(ref)[0] == pytest.approx(13 / 117)
  now = _text({"new1": 7, "new2": 6, **{f"c{i}": 3 for i in range(26)}, "c0": 3})
  [found] = _new_values(now, ref)
  assert found.kind == "info" and found.check == th.NEW_VALUES
  assert column_checks.new_value_share(now, ref) == pytest.approx(13 / 91)
  assert "expected 11.1%" in found.text
  renamed = _text({f"C{i}": 3 for i in range(30)})
  [stop] = _new_values(renamed, ref)
  assert stop.kind == "stop" and "100.0% of its cells > 10.0%" in stop.text
  assert "expected 11.1% from the live version's values seen once" in stop.text


def test_new_values_stop_past_the_bound_where_the_reference_has_no_values_seen_once():
  ref = _text({f"c{i}": 20 for i in range(5)})
  assert column_checks.unseen_share(ref) == (0.0, 0.0)
  [stop] = _new_values(_text({"c0": 80, "other": 12}), ref)
  assert stop.kind == "stop" and stop.threshold == pytest.approx(0.1)
