"""The Optimizer TFX component: pruned, quantized, ONNX and TensorRT variants of a model."""

import json
from collections.abc import Sequence
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec

from components import artifacts
from components.optimizer import executor, spec
from components.optimizer.run_config import OptimizerConfig
from core import defaults, tasks


def _checked_config(task: str, variants: Sequence[str], **options) -> OptimizerConfig:
  """The options as the executor will rebuild them, checked now so that wiring fails early.

  Raises:
    ValueError: for an unknown variant, task, tensorrt mode or an out-of-range number.
  """
  if task not in (tasks.AUTO, *tasks.TASKS):
    raise ValueError(f"task={task!r}; pass 'auto' or one of {tasks.TASKS}.")
  config = OptimizerConfig(
    # A bare string is kept as is so that validate() rejects it instead of splitting it.
    variants=variants if isinstance(variants, str) else tuple(variants),
    **options,
  )
  config.validate()
  return config


def _parameters(config: OptimizerConfig) -> dict[str, Any]:
  """The execution parameters the executor rebuilds `config` from (see spec.OptimizerSpec)."""
  return {
    spec.VARIANTS_KEY: json.dumps(list(config.variants)),
    spec.TARGET_SPARSITY_KEY: float(config.target_sparsity),
    spec.MAX_ACCURACY_DROP_KEY: float(config.max_accuracy_drop),
    spec.MIN_AGREEMENT_KEY: float(config.min_agreement),
    spec.TENSORRT_KEY: config.tensorrt,
    spec.LATENCY_RUNS_KEY: int(config.latency_runs),
    spec.FINE_TUNE_EPOCHS_KEY: int(config.fine_tune_epochs),
    spec.MAX_TRAIN_ROWS_KEY: int(config.max_train_rows),
    spec.MAX_EVAL_ROWS_KEY: int(config.max_eval_rows),
  }


class Optimizer(base_component.BaseComponent):
  """Converts a trained Keras model into smaller/faster variants and measures each.

  Every variant is measured on the eval split in its own runtime (the task's metric,
  agreement with the baseline, size raw and gzipped, batch-1 latency) and blessed iff its
  metric drop stays within `max_accuracy_drop` points. The blessed variants are listed on
  `optimized_model` and in its `variants.json` index; each variant folder holds its
  `signature.json`; the full measurements are in `report` (report.json/.md/.png).
  """

  SPEC_CLASS = spec.OptimizerSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(
    self,
    model: types.BaseChannel,
    examples: types.BaseChannel,
    schema: types.BaseChannel | None = None,
    transform_graph: types.BaseChannel | None = None,
    *,
    task: str = tasks.AUTO,
    label_key: str = defaults.LABEL_KEY,
    variants: Sequence[str] = defaults.DEFAULT_VARIANTS,
    target_sparsity: float = defaults.TARGET_SPARSITY,
    max_accuracy_drop: float = defaults.VARIANT_MAX_DROP,
    min_agreement: float = defaults.VARIANT_MIN_AGREEMENT,
    tensorrt: str = defaults.TENSORRT_AUTO,
    latency_runs: int = 200,
    fine_tune_epochs: int = OptimizerConfig.fine_tune_epochs,
    max_train_rows: int = 2000,
    max_eval_rows: int = 10000,
  ):
    """Wires the Optimizer.

    Args:
      model: channel of a `Model` whose Format-Serving is a Keras SavedModel.
      examples: channel of `Examples` with `train` and `eval` splits.
      schema: channel of a `Schema`; parses the rows for models without a contract file.
      transform_graph: channel of a `TransformGraph` when the model takes transformed
        features; the rows go through it first.
      task: 'auto' (the model's contract, else guessed from its output) or a task name.
      label_key: the label as the model sees it (e.g. 'species_xf' after a Transform).
      variants: names from core.defaults.VARIANTS; `qat` is off by default.
        `tensorrt_fp16` is switched by `tensorrt` alone (listing it changes nothing).
      target_sparsity: kernel sparsity the pruned variants reach.
      max_accuracy_drop: blessing bound: accuracy points (classification) or percent of RMSE
        (regression) a variant may lose against the baseline.
      min_agreement: blessing bound: the share of eval rows on which a variant must agree with
        the baseline (the same class; for regression, within a tenth of the label's standard
        deviation).
      tensorrt: 'off', 'auto' (build a TensorRT FP16 engine where possible, else record why
        not) or 'required' (fail without TensorRT and a CUDA GPU). Anything but 'off' also runs
        the `onnx` variant the engine is built from.
      latency_runs: timed batch-1 predictions per variant.
      fine_tune_epochs: distillation epochs for pruning and QAT.
      max_train_rows: cap on the train sample used for fine-tuning and calibration.
      max_eval_rows: cap on the eval rows measured.

    Raises:
      ValueError: for an unknown variant, task, tensorrt mode or an out-of-range number.
    """
    config = _checked_config(
      task,
      variants,
      tensorrt=tensorrt,
      target_sparsity=target_sparsity,
      max_accuracy_drop=max_accuracy_drop,
      min_agreement=min_agreement,
      latency_runs=latency_runs,
      fine_tune_epochs=fine_tune_epochs,
      max_train_rows=max_train_rows,
      max_eval_rows=max_eval_rows,
    )
    component_spec = spec.OptimizerSpec(
      model=model,
      examples=examples,
      schema=schema,
      transform_graph=transform_graph,
      task=task,
      label_key=label_key,
      **_parameters(config),
      optimized_model=types.Channel(type=artifacts.OptimizedModel),
      report=types.Channel(type=artifacts.OptimizationReport),
    )
    super().__init__(spec=component_spec)
