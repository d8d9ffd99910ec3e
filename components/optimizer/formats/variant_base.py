"""The Variant interface every format implements, and the context its conversions share."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import numpy as np
import tensorflow as tf

from components import model_contract
from components.optimizer.formats import runtime_base

T = TypeVar("T")


@dataclasses.dataclass
class Conversion:
  """What a variant's `convert` produced.

  Attributes:
    model_files: files (relative to the variant folder) whose size is measured; the first one is
      the file a runtime loads.
    details: variant-specific facts for the report (sparsity reached, parity check, op sets).
  """

  model_files: list[str]
  details: dict[str, Any] = dataclasses.field(default_factory=dict)


class ConversionRefused(ValueError):
  """A conversion not attempted because it is known to crash or to be wrong for this model.

  Its message says why and which variant to serve instead; the Optimizer reports the variant as
  skipped with it, not as failed.
  """


class ConversionContext:
  """Inputs shared by all variants, with a cache for the work several variants reuse.

  A format keeps what its variants share (the pruned model, the ONNX export, a SavedModel
  export) with `shared`, so that it is produced once per optimize() call, in `scratch_dir`.

  Attributes:
    baseline_path: the baseline Keras model saved as .h5 (variants load fresh copies).
    train_inputs: train sample, input name -> array (fine-tuning and calibration).
    train_targets: the baseline's outputs on the train sample (distillation targets).
    eval_inputs: eval rows, input name -> array.
    baseline_eval_outputs: the baseline's outputs on the eval rows.
    config: the OptimizerConfig.
    scratch_dir: a temporary folder for shared intermediate files.
    contract: the model's contract (the default model's), or None for a module's own model.
    restored_baseline: the baseline itself when it wraps a function restored from a SavedModel
      without Keras config (see keras_model.RestoredCall): it cannot be reloaded from
      `baseline_path`, so the variants share it, and those that rebuild its layers skip.
  """

  def __init__(
    self,
    *,
    baseline_path: str,
    train_inputs: runtime_base.Inputs,
    train_targets: np.ndarray,
    eval_inputs: runtime_base.Inputs,
    baseline_eval_outputs: np.ndarray,
    config: Any,
    scratch_dir: str,
    restored_baseline: tf.keras.Model | None = None,
    contract: model_contract.ModelContract | None = None,
  ):
    self.restored_baseline = restored_baseline
    self.contract = contract
    self.baseline_path = baseline_path
    self.train_inputs = train_inputs
    self.train_targets = train_targets
    self.eval_inputs = eval_inputs
    self.baseline_eval_outputs = baseline_eval_outputs
    self.config = config
    self.scratch_dir = scratch_dir
    self._shared: dict[str, Any] = {}

  def shared(self, key: str, build: Callable[[], T]) -> T:
    """The value kept under `key`, built by `build()` on first use.

    Args:
      key: names the value; formats prefix their keys with their own name.
      build: makes the value; a failure leaves nothing kept, so the next variant tries again.

    Returns:
      The kept value; variants must not modify it.
    """
    if key not in self._shared:
      self._shared[key] = build()
    return self._shared[key]

  def load_baseline(self) -> tf.keras.Model:
    """A fresh copy of the baseline Keras model (variants may modify their copy).

    A restored baseline is shared: the variants that would modify it are skipped.

    Returns:
      The Keras model.
    """
    if self.restored_baseline is not None:
      return self.restored_baseline
    return tf.keras.models.load_model(self.baseline_path, compile=False)

  def keras_layers_missing(self, what: str, variants: str) -> str | None:
    """Why `what` cannot run on a restored baseline (it rebuilds Keras layers).

    Args:
      what: the change that rebuilds the layers ("pruning").
      variants: the variants it would give, for the advice.

    Returns:
      The reason, with how to save the model instead; None for a Keras baseline.
    """
    if self.restored_baseline is None:
      return None
    return (
      f"{what} needs the Keras model; run_fn saved it with tf.saved_model.save, which keeps no "
      "Keras config: save with model.save(fn_args.serving_model_dir, save_format='tf', "
      f"signatures=...) to get {variants}."
    )

  def fine_tune_kwargs(self) -> dict[str, Any]:
    """Distillation settings; small samples get more epochs so every run has enough steps.

    Returns:
      The epochs, batch_size, learning_rate and seed keyword arguments of fine_tuning.
    """
    cfg = self.config
    rows = runtime_base.rows(self.train_inputs)
    steps_per_epoch = max(1, -(-rows // cfg.fine_tune_batch_size))
    return {
      "epochs": max(cfg.fine_tune_epochs, -(-cfg.min_fine_tune_steps // steps_per_epoch)),
      "batch_size": cfg.fine_tune_batch_size,
      "learning_rate": cfg.fine_tune_learning_rate,
      "seed": cfg.seed,
    }


class Variant(abc.ABC):
  """One optimization: `convert` writes files into a folder, `load` opens them in a runtime.

  The optimizer then measures the runtime and gates the result; variants never measure or gate
  themselves, so every variant is judged the same way.
  """

  name: ClassVar[str]
  runtime: ClassVar[str]
  # Whether convert() builds or trains Keras models (memory is released after such variants).
  builds_models: ClassVar[bool] = False

  def skip_reason(self, context: ConversionContext) -> str | None:
    """Returns why this variant cannot run on this host, or None to run it."""
    del context
    return None

  @abc.abstractmethod
  def convert(self, context: ConversionContext, out_dir: str) -> Conversion:
    """Writes the converted model into `out_dir` (which exists and is empty)."""

  @abc.abstractmethod
  def load(self, out_dir: str, conversion: Conversion) -> runtime_base.Runtime:
    """Opens the converted model in this variant's runtime."""
