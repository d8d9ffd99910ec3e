"""What an optimize() run is given besides its rows: its options and the facts about the model."""

from __future__ import annotations

import dataclasses
from typing import Any

from components.optimizer import formats
from core import defaults
from core.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """Options of one optimize() run.

  Attributes:
    variants: variant names to run (see core.defaults.VARIANTS). `tensorrt_fp16` may be
      listed but is switched by `tensorrt` alone. With tensorrt 'auto' or 'required', `onnx`
      runs too, since the engine is built from the checked ONNX export.
    tensorrt: 'off', 'auto' (build an FP16 engine when the tensorrt package and a CUDA GPU
      are present, else record why not) or 'required' (fail when they are not).
    target_sparsity: fraction of kernel weights the `pruned` variants zero.
    max_accuracy_drop: a variant is blessed only if its metric is at most this many points
      worse than the baseline's: accuracy percentage points for classification, percent of the
      RMSE for regression.
    min_agreement: ... and only if it agrees with the baseline on at least this share of the
      eval rows (same class; for regression within measurement.REGRESSION_AGREEMENT_TOLERANCE of
      the label's standard deviation).
    latency_runs: timed batch-1 predictions per variant.
    warmup_runs: untimed batch-1 predictions before timing.
    fine_tune_epochs: epochs of distillation for pruning and QAT.
    min_fine_tune_steps: at least this many distillation steps (more epochs on small data).
    fine_tune_batch_size: batch size of that fine-tuning.
    fine_tune_learning_rate: Adam learning rate of that fine-tuning.
    representative_rows: train rows used to calibrate int8 conversions.
    onnx_parity_tolerance: largest output difference ONNX Runtime may show against
      TensorFlow, relative to the output's scale (at least 1).
    max_train_rows: cap on the train sample (fine-tuning and calibration).
    max_eval_rows: cap on the eval rows measured.
    seed: seeds sampling and fine-tuning.
  """

  variants: tuple[str, ...] = defaults.DEFAULT_VARIANTS
  tensorrt: str = defaults.TENSORRT_AUTO
  target_sparsity: float = defaults.TARGET_SPARSITY
  max_accuracy_drop: float = defaults.VARIANT_MAX_DROP
  min_agreement: float = defaults.VARIANT_MIN_AGREEMENT
  latency_runs: int = 200
  warmup_runs: int = 20
  fine_tune_epochs: int = 8
  min_fine_tune_steps: int = 600
  fine_tune_batch_size: int = 64
  fine_tune_learning_rate: float = 1e-3
  representative_rows: int = 200
  onnx_parity_tolerance: float = 1e-4
  max_train_rows: int = 2000
  max_eval_rows: int = 10000
  seed: int = 0

  def validate(self) -> None:
    """Checks the options make sense together.

    Raises:
      UserInputError: naming the option to change.
    """
    if isinstance(self.variants, str):
      raise UserInputError(f"variants must be a list of names, not the string {self.variants!r}.")
    known = formats.names()
    for name in self.variants:
      if name not in known:
        raise UserInputError(f"Unknown optimizer variant {name!r}; choose from {known}.")
    if self.tensorrt not in defaults.TENSORRT_MODES:
      raise UserInputError(
        f"tensorrt={self.tensorrt!r} is not valid; pass one of {defaults.TENSORRT_MODES}."
      )
    if not 0.0 <= self.target_sparsity < 1.0:
      raise UserInputError(f"target_sparsity={self.target_sparsity} must be in [0, 1), e.g. 0.8.")
    for field in (
      "latency_runs",
      "fine_tune_epochs",
      "fine_tune_batch_size",
      "representative_rows",
      "max_train_rows",
      "max_eval_rows",
    ):
      if getattr(self, field) < 1:
        raise UserInputError(f"{field}={getattr(self, field)} must be at least 1.")
    if self.warmup_runs < 0 or self.max_accuracy_drop < 0:
      raise UserInputError("warmup_runs and max_accuracy_drop must not be negative.")
    if not 0.0 <= self.min_agreement <= 1.0:
      raise UserInputError(f"min_agreement={self.min_agreement} must be in [0, 1], e.g. 0.9.")
    if self.fine_tune_learning_rate <= 0 or self.onnx_parity_tolerance < 0:
      raise UserInputError(
        "fine_tune_learning_rate must be positive and onnx_parity_tolerance >= 0."
      )

  def variant_names(self) -> list[str]:
    """The variants to run, in report order, including those implied by `tensorrt`."""
    selected = set(self.variants) - {defaults.TENSORRT_FP16}
    if self.tensorrt != defaults.TENSORRT_OFF:
      selected.update((defaults.ONNX, defaults.TENSORRT_FP16))
    ordered = [name for name in defaults.VARIANTS if name in selected]
    # Formats the kit does not list in its defaults (extensions) run after the built-in ones.
    return ordered + [name for name in self.variants if name not in defaults.VARIANTS]


@dataclasses.dataclass(frozen=True)
class ModelFacts:
  """What the measurements and the signature files need to know about the model.

  Attributes:
    task: 'binary', 'multiclass' or 'regression'.
    label_key: the label the model is measured against.
    classes: class vocabulary (index i stands for classes[i]); empty when unknown.
    output: what the output tensor means, in one sentence.
    columns: model input name -> the data columns it takes, in order (raw or transformed).
    missing: model input name -> how a missing value is fed ("NaN", "").
    preprocessing_included: whether the model takes raw columns; False when a Transform
      graph must run first (it is shipped beside the variants).
    contract: the model's contract (the default model's), or None.
  """

  task: str
  label_key: str
  classes: tuple = ()
  output: str = ""
  columns: dict[str, list[str]] = dataclasses.field(default_factory=dict)
  missing: dict[str, str] = dataclasses.field(default_factory=dict)
  preprocessing_included: bool = True
  contract: Any = None
