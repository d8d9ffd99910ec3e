"""Measuring a variant: the task's metric, agreement with the baseline, the gate, size, latency."""

from __future__ import annotations

import gzip
import os
import time

import numpy as np

from components.optimizer.formats import runtime_base
from components.optimizer.run_config import OptimizerConfig
from core import tasks

# Regression agreement: a prediction agrees when it is within this share of the label's standard
# deviation of the baseline's, wide enough for int8's rounding (docs/optimizer.md has its size).
REGRESSION_AGREEMENT_TOLERANCE = 0.1
# Two-sided 95% normal quantile, for the confidence intervals of the eval sample's metrics.
_Z95 = 1.959964


class Judge:
  """Turns outputs into the task's metric and agreement, and gates variants."""

  def __init__(self, task: str, labels: np.ndarray, baseline_outputs: np.ndarray):
    self.task = task
    self.labels = np.asarray(labels)
    width = baseline_outputs.shape[1]
    # A one-column classifier output is a probability, or a logit when it leaves [0, 1].
    self.threshold = 0.5
    if (
      task == tasks.BINARY
      and width == 1
      and (baseline_outputs.min() < 0 or baseline_outputs.max() > 1)
    ):
      self.threshold = 0.0
    spread = float(np.std(self.labels.astype(np.float64))) if task == tasks.REGRESSION else 0.0
    self.tolerance = REGRESSION_AGREEMENT_TOLERANCE * (spread or 1.0)
    self.reference = self.decide(baseline_outputs)

  @property
  def metric_name(self) -> str:
    return "rmse" if self.task == tasks.REGRESSION else "accuracy"

  def decide(self, outputs: np.ndarray) -> np.ndarray:
    if self.task == tasks.REGRESSION:
      return outputs[:, 0].astype(np.float64)
    if outputs.shape[1] == 1:
      return (outputs[:, 0] >= self.threshold).astype(np.int64)
    return outputs.argmax(axis=1)

  def metrics(self, outputs: np.ndarray, baseline: bool = False) -> dict[str, float]:
    decided = self.decide(outputs)
    if self.task == tasks.REGRESSION:
      err = decided - self.labels.astype(np.float64)
      out = {"rmse": float(np.sqrt(np.mean(err**2))), "mae": float(np.mean(np.abs(err)))}
      if not baseline:
        out["agreement"] = float(np.mean(np.abs(decided - self.reference) <= self.tolerance))
    else:
      out = {"accuracy": float(np.mean(decided == self.labels))}
      if not baseline:
        out["agreement"] = float(np.mean(decided == self.reference))
    out["metric_value"] = out[self.metric_name]
    return out

  def gate(
    self, metrics: dict[str, float], baseline_value: float, config: OptimizerConfig
  ) -> tuple[bool, float, str]:
    """(blessed, drop, why not): the metric drop and the agreement each have a bound.

    The drop is accuracy points lost, or percent of RMSE gained; negative is better. `why not`
    names each bound the variant missed ('' when blessed).
    """
    value = metrics["metric_value"]
    if self.task == tasks.REGRESSION:
      drop = round((value - baseline_value) / max(baseline_value, 1e-12) * 100.0, 6)
      unit = "% of the RMSE"
    else:
      drop = round((baseline_value - value) * 100.0, 6)
      unit = " accuracy points"
    missed = []
    if drop > config.max_accuracy_drop:
      missed.append(f"metric: {drop:+.2f}{unit}, over the {config.max_accuracy_drop:g} allowed")
    agreement = metrics.get("agreement", 1.0)
    if agreement < config.min_agreement:
      missed.append(
        f"agreement: {agreement:.1%} of the rows agree with the baseline, under the "
        f"{config.min_agreement:.0%} required"
      )
    return not missed, drop, "; ".join(missed)

  def confidence(self, outputs: np.ndarray) -> float:
    """Half-width of the 95% confidence interval of the metric on these rows.

    Accuracy: the Wilson interval's half-width, in points. RMSE: the delta method on the mean
    squared error, in percent of the RMSE. It says how far the eval sample's figure may lie
    from the whole split's.
    """
    n = len(self.labels)
    if not n:
      return float("nan")
    decided = self.decide(outputs)
    if self.task == tasks.REGRESSION:
      squared = (decided - self.labels.astype(np.float64)) ** 2
      mse = float(np.mean(squared))
      if mse <= 0:
        return 0.0
      half = _Z95 * float(np.std(squared)) / np.sqrt(n)
      return half / (2 * mse) * 100.0
    p = float(np.mean(decided == self.labels))
    z2 = _Z95**2
    return _Z95 * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n) * 100.0


def file_sizes(folder: str, filenames: list[str]) -> dict:
  """Raw and gzip level 9 sizes of files in `folder`."""
  raw = 0
  gzipped = 0
  for filename in filenames:
    with open(os.path.join(folder, filename), "rb") as f:
      content = f.read()
    raw += len(content)
    gzipped += len(gzip.compress(content, compresslevel=9))
  return {"size_bytes": raw, "gzipped_size_bytes": gzipped}


def batch1_latency_ms(
  runtime: runtime_base.Runtime, inputs: runtime_base.Inputs, runs: int, warmup_runs: int
) -> dict:
  """Times single-example predictions: p50, p90 and the number of timed runs."""
  n = min(runtime_base.rows(inputs), runs + warmup_runs)
  rows = [
    {
      k: np.ascontiguousarray(v[i : i + 1]) if v.dtype != object else v[i : i + 1]
      for k, v in inputs.items()
    }
    for i in range(n)
  ]
  for i in range(warmup_runs):
    runtime.predict(rows[i % len(rows)])
  timings = np.empty(runs)
  for i in range(runs):
    row = rows[i % len(rows)]
    start = time.perf_counter()
    runtime.predict(row)
    timings[i] = time.perf_counter() - start
  return {
    "latency_ms_p50": float(np.percentile(timings, 50) * 1e3),
    "latency_ms_p90": float(np.percentile(timings, 90) * 1e3),
    "latency_runs": runs,
  }
