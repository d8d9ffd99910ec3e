"""TFX's stock Evaluator, told to compare against no baseline when nothing is live yet."""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx import v1 as tfx
from tfx.components.evaluator import executor as stock_evaluator
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_component_specs

from components.live_model import executor as live_executor


class Executor(stock_evaluator.Executor):
  """Drops a baseline that LiveModel marked unavailable, then runs the stock Evaluator.

  On the first run nothing is live: the Evaluator then applies the value thresholds alone, as
  stock TFX does when its baseline channel is empty.
  """

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    key = standard_component_specs.BASELINE_MODEL_KEY
    baselines = [a for a in input_dict.get(key) or [] if live_executor.is_available(a)]
    input_dict = {**input_dict, key: baselines}
    if not baselines:
      input_dict.pop(key)
    super().Do(input_dict, output_dict, exec_properties)


class BaselineAwareEvaluator(tfx.components.Evaluator):
  """`tfx.components.Evaluator` whose baseline may be an unavailable LiveModel output."""

  EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
