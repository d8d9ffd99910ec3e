"""The Optimizer TFX component: pruned, quantized, ONNX and TensorRT variants of a model."""

import json
from collections.abc import Sequence

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec

from components.optimizer import artifacts, executor, optimizer_lib, spec


class Optimizer(base_component.BaseComponent):
  """Converts a trained Keras model into smaller/faster variants and measures each.

  Every variant is measured on the eval split in its own runtime (accuracy, agreement with the
  baseline, size raw and gzipped, batch-1 latency) and blessed iff its accuracy drop stays
  within `max_accuracy_drop` percentage points. Blessings are custom properties of
  `optimized_model`; the full measurements are in `report` (report.json/.md/.png).
  """

  SPEC_CLASS = spec.OptimizerSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(
    self,
    model: types.BaseChannel,
    examples: types.BaseChannel,
    schema: types.BaseChannel | None = None,
    *,
    variants: Sequence[str] = optimizer_lib.DEFAULT_VARIANTS,
    target_sparsity: float = 0.8,
    max_accuracy_drop: float = 1.0,
    tensorrt: str = "auto",
    latency_runs: int = 200,
    fine_tune_epochs: int = 3,
    int8_fallback: bool = False,
    max_train_rows: int = 2000,
    max_eval_rows: int = 10000,
  ):
    """Wires the Optimizer.

    Args:
      model: channel of a `Model` with a `Format-Keras` copy (model.h5 + input_spec.json).
      examples: channel of `Examples` with `train` and `eval` splits.
      schema: optional channel of a `Schema`; when given, it must know every model input.
      variants: names from optimizer_lib.VARIANT_ORDER; `qat` is off by default.
        `tensorrt_fp16` is switched by `tensorrt` alone (listing it changes nothing).
      target_sparsity: kernel sparsity the pruned variants reach.
      max_accuracy_drop: blessing bound, in percentage points of eval accuracy.
      tensorrt: 'off', 'auto' (build a TensorRT FP16 engine where possible, else record why
        not) or 'required' (fail without TensorRT and a CUDA GPU). Anything but 'off' also runs
        the `onnx` variant the engine is built from.
      latency_runs: timed batch-1 predictions per variant.
      fine_tune_epochs: fine-tuning epochs for pruning and QAT.
      int8_fallback: let int8 conversions keep float ops and float input/output.
      max_train_rows: cap on the train sample used for fine-tuning and calibration.
      max_eval_rows: cap on the eval rows measured.

    Raises:
      ValueError: for an unknown variant, tensorrt mode or an out-of-range number.
    """
    config = optimizer_lib.OptimizerConfig(
      # A bare string is kept as is so that validate() rejects it instead of splitting it.
      variants=variants if isinstance(variants, str) else tuple(variants),
      tensorrt=tensorrt,
      target_sparsity=target_sparsity,
      max_accuracy_drop=max_accuracy_drop,
      latency_runs=latency_runs,
      fine_tune_epochs=fine_tune_epochs,
      int8_fallback=bool(int8_fallback),
      max_train_rows=max_train_rows,
      max_eval_rows=max_eval_rows,
    )
    config.validate()
    component_spec = spec.OptimizerSpec(
      model=model,
      examples=examples,
      schema=schema,
      variants=json.dumps(list(config.variants)),
      target_sparsity=float(target_sparsity),
      max_accuracy_drop=float(max_accuracy_drop),
      tensorrt=tensorrt,
      latency_runs=int(latency_runs),
      fine_tune_epochs=int(fine_tune_epochs),
      int8_fallback=int(bool(int8_fallback)),
      max_train_rows=int(max_train_rows),
      max_eval_rows=int(max_eval_rows),
      optimized_model=types.Channel(type=artifacts.OptimizedModel),
      report=types.Channel(type=artifacts.OptimizationReport),
    )
    super().__init__(spec=component_spec)
