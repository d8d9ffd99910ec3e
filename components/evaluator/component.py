"""The Evaluator component: stock TFX's Evaluator whose baseline may be unavailable."""

from __future__ import annotations

import tensorflow_model_analysis as tfma
from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts
from tfx.utils import json_utils

from components.evaluator import executor
from components.evaluator.spec import EvaluatorSpec


class BaselineAwareEvaluator(base_component.BaseComponent):
  """`tfx.components.Evaluator` whose baseline may be an unavailable LiveModel output and whose
  automatic floor comes from the eval split.

  It takes the stock Evaluator's inputs and produces its outputs (`evaluation`, `blessing`),
  so TFMA's ModelEvaluation and ModelBlessing are exactly what stock writes; the blessing also
  records `floor` and `floor_reason` when the floor was automatic.
  """

  SPEC_CLASS = EvaluatorSpec
  EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

  def __init__(
    self,
    examples: types.BaseChannel,
    model: types.BaseChannel,
    eval_config: tfma.EvalConfig,
    baseline_model: types.BaseChannel | None = None,
    schema: types.BaseChannel | None = None,
    example_splits: list[str] | None = None,
    auto_floor: str | None = None,
    baseline_schema: types.BaseChannel | None = None,
    quantity_eval_config: tfma.EvalConfig | None = None,
  ):
    """Wires the Evaluator.

    Args:
      examples: Examples to evaluate on (the `eval` split unless `example_splits`).
      model: the candidate Model.
      eval_config: TFMA's EvalConfig (metrics, thresholds, slices).
      baseline_model: LiveModel's baseline (possibly marked unavailable).
      schema: optional Schema of the examples; with `baseline_schema`, it says which columns
        changed type since the live version was trained (the stock executor is not given it).
      example_splits: splits to evaluate on.
      auto_floor: `floor_lib.auto_floor_spec(task)` when the floor is automatic: the
        task metric's value threshold is then set from the eval split's label counts.
      baseline_schema: LiveModel's reference_schema, the schema the live version was trained
        on: the baseline is scored on the examples converted to its types (`conform_lib`).
      quantity_eval_config: for a count label read both ways, the EvalConfig of the quantity
        reading, used when the candidate Model's task is regression.
    """
    spec = EvaluatorSpec(
      examples=examples,
      model=model,
      baseline_model=baseline_model,
      schema=schema,
      eval_config=eval_config,
      example_splits=json_utils.dumps(example_splits),
      auto_floor=auto_floor,
      baseline_schema=baseline_schema,
      quantity_eval_config=quantity_eval_config,
      evaluation=types.Channel(type=standard_artifacts.ModelEvaluation),
      blessing=types.Channel(type=standard_artifacts.ModelBlessing),
    )
    super().__init__(spec=spec)
