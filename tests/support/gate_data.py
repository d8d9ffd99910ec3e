"""Nights for data-gate tests: a CSV through the kit's own ExampleGen and StatisticsGen, and the
faults real sources deliver (a unit change, renamed categories, a missing or emptied column, an
inverted label)."""

from __future__ import annotations

import json
import os
import pathlib

import numpy as np
import pandas as pd
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs as specs

from components.data_gate import gate_lib
from components.example_gen.executor import Executor as ExampleGenExecutor
from components.statistics_gen.executor import Executor as StatisticsGenExecutor
from tests.support import example_gen_runs

TAXI_LABEL = "big_tip"


def taxi_frame() -> pd.DataFrame:
  """The Chicago taxi sample inside the tfx wheel, with `big_tip` (tip over 20% of the fare)
  as the label and `tips` (which gives it away) left out; every cell as its CSV text."""
  import tfx

  path = pathlib.Path(tfx.__file__).parent / "examples/chicago_taxi_pipeline/data/simple/data.csv"
  frame = pd.read_csv(path, dtype=str, keep_default_na=False)
  tips = pd.to_numeric(frame["tips"], errors="coerce")
  fare = pd.to_numeric(frame["fare"], errors="coerce")
  frame[TAXI_LABEL] = (tips > 0.2 * fare).astype(int).astype(str)
  return frame.drop(columns=["tips"])


def write_csv(frame: pd.DataFrame, folder: str | os.PathLike, name: str = "data.csv") -> str:
  os.makedirs(folder, exist_ok=True)
  path = os.path.join(folder, name)
  frame.to_csv(path, index=False)
  return path


def night_from_csv(csv_path: str, work_dir: str | os.PathLike, label_key: str) -> gate_lib.Night:
  """The train split's statistics, inferred schema, label counts and span digest of one CSV, as
  the pipeline computes them (the kit's ExampleGen and StatisticsGen executors, TFDV's schema
  inference). The CSV is read as span 0 of the pattern `<its folder>-{SPAN}/<its name>`."""
  import tensorflow_data_validation as tfdv

  from components.example_gen.spec import UNRESOLVED_INPUT_CONFIG_KEY

  work = pathlib.Path(work_dir)
  folder, name = os.path.split(csv_path)
  spanned = example_gen_runs.exec_properties(
    os.path.dirname(folder), pattern=f"{os.path.basename(folder)}-{{SPAN}}/{name}"
  )
  props = example_gen_runs.exec_properties(
    os.path.dirname(folder),
    pattern=f"{os.path.basename(folder)}/{name}",
    buckets=(4, 1),
    label_key=label_key,
    **{UNRESOLVED_INPUT_CONFIG_KEY: spanned["input_config"]},
  )
  examples = example_gen_runs.run_executor(ExampleGenExecutor, props, work / "examples")
  statistics = standard_artifacts.ExampleStatistics()
  statistics.uri = str(work / "statistics")
  StatisticsGenExecutor().Do(
    {specs.EXAMPLES_KEY: [examples]}, {specs.STATISTICS_KEY: [statistics]}, {}
  )
  stats = tfdv.load_stats_binary(str(work / "statistics" / "Split-train" / "FeatureStats.pb"))
  schema = tfdv.infer_schema(stats, infer_feature_shape=True)
  label_stats = json.loads(examples.get_string_custom_property("label_stats") or "{}")
  counts = (label_stats.get("train") or {}).get("counts")
  digests = json.loads(examples.get_string_custom_property("span_digests") or "{}")
  return gate_lib.Night(stats.datasets[0], schema, counts, digests)


# ----------------------------------------------------------------------------- faults


def unit_change(frame: pd.DataFrame, column: str, factor: float) -> pd.DataFrame:
  out = frame.copy()
  values = pd.to_numeric(out[column], errors="coerce") * factor
  out[column] = [("" if np.isnan(v) else f"{v:.6g}") for v in values]
  return out


def rename_values(frame: pd.DataFrame, column: str, names: dict[str, str]) -> pd.DataFrame:
  out = frame.copy()
  out[column] = out[column].map(lambda v: names.get(v, v))
  return out


def drop_column(frame: pd.DataFrame, column: str) -> pd.DataFrame:
  return frame.drop(columns=[column])


def empty_column(frame: pd.DataFrame, column: str) -> pd.DataFrame:
  out = frame.copy()
  out[column] = ""
  return out


def new_label_class(frame: pd.DataFrame, column: str, value: str, every: int) -> pd.DataFrame:
  """Gives every `every`-th row's label a class the table never had (upstream's new code)."""
  out = frame.copy()
  out.iloc[::every, out.columns.get_loc(column)] = value
  return out


def invert_label(frame: pd.DataFrame, column: str) -> pd.DataFrame:
  """Swaps the two values of a binary label."""
  out = frame.copy()
  values = sorted(set(out[column]) - {""})
  if len(values) != 2:
    raise ValueError(f"{column} has {len(values)} values, not 2")
  swap = {values[0]: values[1], values[1]: values[0]}
  out[column] = out[column].map(lambda v: swap.get(v, v))
  return out
