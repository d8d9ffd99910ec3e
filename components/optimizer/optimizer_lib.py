"""Plain-Python core of the Optimizer: convert each variant, measure it, gate it, report."""

import dataclasses
import gc
import gzip
import json
import os
import platform
import shutil
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import logging

from components.errors import UserInputError
from components.optimizer import runtimes, tensorrt_lib
from components.optimizer import variants as variant_lib

MODEL_FILENAME = "model.h5"
INPUT_SPEC_FILENAME = "input_spec.json"
# Index of the variants next to their folders, so a Pusher finds their metrics with them.
VARIANTS_INDEX_FILENAME = "variants.json"

# Order in which variants run and appear in the report.
VARIANT_ORDER = (
  variant_lib.PRUNED,
  variant_lib.TFLITE_FLOAT32,
  variant_lib.TFLITE_DYNAMIC_RANGE,
  variant_lib.TFLITE_FLOAT16,
  variant_lib.TFLITE_INT8,
  variant_lib.PRUNED_INT8,
  variant_lib.QAT,
  variant_lib.ONNX,
  variant_lib.TENSORRT_FP16,
)
DEFAULT_VARIANTS = (
  variant_lib.PRUNED,
  variant_lib.TFLITE_FLOAT32,
  variant_lib.TFLITE_DYNAMIC_RANGE,
  variant_lib.TFLITE_FLOAT16,
  variant_lib.TFLITE_INT8,
  variant_lib.PRUNED_INT8,
  variant_lib.ONNX,
)

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"

SIZE_BASIS = (
  "baseline size = the Keras h5 file re-saved without optimizer state (weights and "
  "architecture only); variant sizes are their model files; gzipped = gzip level 9 in memory"
)
# Converter messages can run to pages of MLIR; the report keeps the head, the log keeps all.
MAX_REASON_CHARS = 2000


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """Options of one optimize() run.

  Attributes:
    variants: variant names to run (see VARIANT_ORDER). `tensorrt_fp16` may be listed but is
      switched by `tensorrt` alone. With tensorrt 'auto' or 'required', `onnx` runs too, since
      the engine is built from the checked ONNX export.
    tensorrt: 'off' (no tensorrt_fp16 entry), 'auto' (build an FP16 engine when the tensorrt
      package and a CUDA GPU are present, else record it as skipped with the reason) or
      'required' (fail when they are not).
    target_sparsity: fraction of kernel weights the `pruned` variants zero.
    max_accuracy_drop: a variant is blessed iff its accuracy is at most this many percentage
      points below the baseline's.
    latency_runs: timed batch-1 predictions per variant.
    warmup_runs: untimed batch-1 predictions before timing.
    fine_tune_epochs: epochs of fine-tuning for pruning and QAT.
    fine_tune_batch_size: batch size of that fine-tuning.
    fine_tune_learning_rate: Adam learning rate of that fine-tuning.
    int8_fallback: let int8 conversions keep float ops (and float input/output) where an op has
      no int8 kernel, instead of failing.
    representative_rows: train rows used to calibrate int8 conversions.
    onnx_parity_tolerance: largest absolute probability difference ONNX Runtime may show
      against TensorFlow.
    max_train_rows: cap on the train sample (fine-tuning and calibration).
    max_eval_rows: cap on the eval rows measured.
    seed: seeds sampling and fine-tuning.
  """

  variants: tuple[str, ...] = DEFAULT_VARIANTS
  tensorrt: str = variant_lib.TENSORRT_AUTO
  target_sparsity: float = 0.8
  max_accuracy_drop: float = 1.0
  latency_runs: int = 200
  warmup_runs: int = 20
  fine_tune_epochs: int = 3
  fine_tune_batch_size: int = 32
  fine_tune_learning_rate: float = 1e-3
  int8_fallback: bool = False
  representative_rows: int = 200
  onnx_parity_tolerance: float = 1e-4
  max_train_rows: int = 2000
  max_eval_rows: int = 10000
  seed: int = 0

  def validate(self) -> None:
    """Checks the options make sense together.

    Raises:
      UserInputError: (a ValueError) naming the option to change.
    """
    if isinstance(self.variants, str):
      raise UserInputError(f"variants must be a list of names, not the string {self.variants!r}.")
    for name in self.variants:
      if name not in variant_lib.VARIANTS:
        raise UserInputError(
          f"Unknown optimizer variant {name!r}; choose from {sorted(variant_lib.VARIANTS)}."
        )
    if self.tensorrt not in variant_lib.TENSORRT_MODES:
      raise UserInputError(
        f"tensorrt={self.tensorrt!r} is not valid; pass one of {variant_lib.TENSORRT_MODES}."
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
    if self.warmup_runs < 0:
      raise UserInputError(f"warmup_runs={self.warmup_runs} must not be negative.")
    if self.fine_tune_learning_rate <= 0 or self.onnx_parity_tolerance < 0:
      raise UserInputError(
        "fine_tune_learning_rate must be positive and onnx_parity_tolerance >= 0."
      )

  def variant_names(self) -> list[str]:
    """The variants to run, in report order, including those implied by `tensorrt`."""
    selected = set(self.variants) - {variant_lib.TENSORRT_FP16}
    if self.tensorrt != variant_lib.TENSORRT_OFF:
      selected.update((variant_lib.ONNX, variant_lib.TENSORRT_FP16))
    ordered = [name for name in VARIANT_ORDER if name in selected]
    # Variants registered outside this module (extensions) run after the built-in ones.
    return ordered + [name for name in self.variants if name not in VARIANT_ORDER]


def file_sizes(folder: str, filenames: list[str]) -> dict:
  """Measures files on disk and gzipped in memory.

  Args:
    folder: the folder holding the files.
    filenames: file names relative to `folder`.

  Returns:
    {"size_bytes": raw total, "gzipped_size_bytes": total of each file gzipped at level 9}.
  """
  raw = 0
  gzipped = 0
  for filename in filenames:
    with open(os.path.join(folder, filename), "rb") as f:
      content = f.read()
    raw += len(content)
    gzipped += len(gzip.compress(content, compresslevel=9))
  return {"size_bytes": raw, "gzipped_size_bytes": gzipped}


def batch1_latency_ms(
  runtime: runtimes.Runtime, x: np.ndarray, runs: int, warmup_runs: int
) -> dict:
  """Times single-example predictions.

  Args:
    runtime: the runtime to time.
    x: float32 rows to cycle through.
    runs: timed predictions.
    warmup_runs: untimed predictions first (tracing, allocation, caches).

  Returns:
    {"latency_ms_p50", "latency_ms_p90", "latency_runs"}.
  """
  rows = [np.ascontiguousarray(x[i : i + 1]) for i in range(min(len(x), runs + warmup_runs))]
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


def measure(
  runtime: runtimes.Runtime,
  eval_x: np.ndarray,
  eval_y: np.ndarray,
  reference_top1: np.ndarray | None,
  config: OptimizerConfig,
) -> tuple[dict, np.ndarray]:
  """Measures accuracy, agreement with the baseline and batch-1 latency of one runtime.

  Args:
    runtime: the variant's (or baseline's) runtime.
    eval_x: float32 eval features.
    eval_y: int eval labels.
    reference_top1: the baseline's predicted classes; None when measuring the baseline itself.
    config: supplies latency_runs and warmup_runs.

  Returns:
    (metrics dict, the runtime's probabilities on eval_x).
  """
  probs = runtimes.predict_batched(runtime, eval_x)
  top1 = probs.argmax(axis=1)
  metrics = {"accuracy": float(np.mean(top1 == eval_y))}
  if reference_top1 is not None:
    metrics["top1_agreement"] = float(np.mean(top1 == reference_top1))
  metrics.update(batch1_latency_ms(runtime, eval_x, config.latency_runs, config.warmup_runs))
  return metrics, probs


def gate(accuracy: float, baseline_accuracy: float, max_accuracy_drop: float) -> tuple[bool, float]:
  """Decides the blessing of one variant.

  Args:
    accuracy: the variant's accuracy in [0, 1].
    baseline_accuracy: the baseline's accuracy in [0, 1].
    max_accuracy_drop: the largest allowed drop in percentage points.

  Returns:
    (blessed, accuracy drop in percentage points; negative when the variant is better).
  """
  # Rounded so that a drop of exactly the bound is not lost to float noise.
  drop = round((baseline_accuracy - accuracy) * 100.0, 6)
  return drop <= max_accuracy_drop, drop


def _ratios(entry: dict, baseline: dict) -> dict:
  keys = (
    "accuracy",
    "size_bytes",
    "gzipped_size_bytes",
    "latency_ms_p50",
    "latency_ms_p90",
  )
  return {key: (entry[key] / baseline[key] if baseline[key] else None) for key in keys}


def _short(error: BaseException) -> str:
  text = f"{type(error).__name__}: {error}"
  return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + " [...]"


def _release_memory() -> None:
  """Drops graphs and objects one variant left behind before the next one starts.

  Checked by running optimize() with every variant 6 times in one process and reading VmRSS
  after each run: it settles within ~5 MB per run (it grew ~45 MB per run while fine-tuning
  used Model.fit; see conversions.fine_tune).
  """
  tf.keras.backend.clear_session()
  gc.collect()


def _run_variant(
  variant: variant_lib.Variant,
  context: variant_lib.ConversionContext,
  staging_dir: str,
  baseline: dict,
  config: OptimizerConfig,
) -> dict:
  """Converts, measures and gates one variant; a failure is recorded, never raised."""
  entry = {"name": variant.name, "runtime": variant.runtime}
  reason = variant.skip_reason(context)
  if reason:
    logging.info("Optimizer variant %s skipped: %s", variant.name, reason)
    return {**entry, "status": STATUS_SKIPPED, "reason": reason, "blessed": False}
  out_dir = os.path.join(staging_dir, variant.name)
  os.makedirs(out_dir)
  runtime = None
  started = time.perf_counter()
  try:
    conversion = variant.convert(context, out_dir)
    convert_seconds = time.perf_counter() - started
    runtime = variant.load(out_dir, conversion)
    metrics, _ = measure(runtime, context.eval_x, context.eval_y, baseline["top1"], config)
  except Exception as error:  # One variant's failure must not stop the others.
    logging.exception("Optimizer variant %s failed.", variant.name)
    shutil.rmtree(out_dir, ignore_errors=True)
    return {**entry, "status": STATUS_FAILED, "reason": _short(error), "blessed": False}
  finally:
    if runtime is not None:
      runtime.close()
    del runtime
    _release_memory()
  entry.update(
    status=STATUS_OK,
    path=os.path.join(variant.name, conversion.model_files[0]),
    files=[os.path.join(variant.name, f) for f in conversion.model_files],
    convert_seconds=round(convert_seconds, 3),
    **metrics,
    **file_sizes(out_dir, conversion.model_files),
  )
  entry["ratios"] = _ratios(entry, baseline)
  entry["blessed"], entry["accuracy_drop_pp"] = gate(
    entry["accuracy"], baseline["accuracy"], config.max_accuracy_drop
  )
  entry["details"] = conversion.details
  logging.info(
    "Optimizer variant %s: accuracy %.4f, %d bytes, p50 %.3f ms, blessed=%s",
    variant.name,
    entry["accuracy"],
    entry["size_bytes"],
    entry["latency_ms_p50"],
    entry["blessed"],
  )
  return entry


def _check_arrays(
  train_x: np.ndarray, train_y: np.ndarray, eval_x: np.ndarray, eval_y: np.ndarray
) -> None:
  for name, x, y in (("train", train_x, train_y), ("eval", eval_x, eval_y)):
    if x.ndim != 2 or len(x) != len(y):
      raise UserInputError(f"{name} features must be [rows, num_features] with one label per row.")
    if len(x) == 0:
      raise UserInputError(
        f"The {name} split has no rows; the Optimizer needs train and eval data."
      )


def _host() -> dict:
  return {
    "platform": platform.platform(),
    "cpu_count": os.cpu_count(),
    "tensorflow": tf.__version__,
  }


def optimize(
  keras_model_dir: str,
  train_x: np.ndarray,
  train_y: np.ndarray,
  eval_x: np.ndarray,
  eval_y: np.ndarray,
  output_dir: str,
  config: OptimizerConfig | None = None,
) -> dict:
  """Builds every configured variant of a Keras model, measures and gates each.

  Each variant is written to `output_dir/<variant>/`; variants that fail or are skipped leave
  no folder. `output_dir/variants.json` lists every variant's metrics and blessing. Nothing is
  written to `output_dir` if the baseline cannot be loaded or evaluated.

  Args:
    keras_model_dir: folder holding `model.h5` (the Format-Keras layout).
    train_x: float32 train sample [rows, num_features] for fine-tuning and calibration.
    train_y: int train labels.
    eval_x: float32 eval features.
    eval_y: int eval labels.
    output_dir: existing folder receiving one sub-folder per variant.
    config: options; defaults to OptimizerConfig().

  Returns:
    The report: baseline and per-variant metrics, blessings and the config (JSON-serialisable).

  Raises:
    UserInputError: (a ValueError) for bad options or data that does not fit the model.
    FileNotFoundError: if `keras_model_dir` has no model.h5.
    tensorrt_lib.TensorRTUnavailableError: with tensorrt='required' on a host that cannot
      build TensorRT engines.
  """
  config = config or OptimizerConfig()
  config.validate()
  started = time.perf_counter()
  if config.tensorrt == variant_lib.TENSORRT_REQUIRED:
    reason = tensorrt_lib.unavailable_reason()
    if reason:
      raise tensorrt_lib.TensorRTUnavailableError(
        f"tensorrt='required' but {reason}; run on a CUDA host with TensorRT or pass "
        "tensorrt='auto'."
      )
  model_path = os.path.join(keras_model_dir, MODEL_FILENAME)
  if not os.path.isfile(model_path):
    raise FileNotFoundError(
      f"No {MODEL_FILENAME} in {keras_model_dir}; the trainer must write the Format-Keras copy."
    )
  train_x = np.asarray(train_x, np.float32)
  eval_x = np.asarray(eval_x, np.float32)
  train_y = np.asarray(train_y).astype(np.int64)
  eval_y = np.asarray(eval_y).astype(np.int64)
  _check_arrays(train_x, train_y, eval_x, eval_y)
  tf.keras.utils.set_random_seed(config.seed)

  with tempfile.TemporaryDirectory(prefix="optimizer-scratch-") as scratch_dir:
    baseline_path = os.path.join(scratch_dir, "baseline.h5")
    model = tf.keras.models.load_model(model_path, compile=False)
    num_features = int(model.inputs[0].shape[-1])
    num_classes = int(model.outputs[0].shape[-1])
    if train_x.shape[1] != num_features or eval_x.shape[1] != num_features:
      raise UserInputError(
        f"The model takes {num_features} features but the data has {eval_x.shape[1]}; check "
        "feature_keys in input_spec.json."
      )
    for y in (train_y, eval_y):
      if y.min() < 0 or y.max() >= num_classes:
        raise UserInputError(
          f"Labels must be class ids in [0, {num_classes}); got {y.min()}..{y.max()}."
        )
    model.save(baseline_path, include_optimizer=False)
    del model
    _release_memory()

    with runtimes.KerasRuntime(baseline_path) as runtime:
      baseline_metrics, baseline_probs = measure(runtime, eval_x, eval_y, None, config)
    baseline = {
      "name": "baseline",
      "runtime": runtimes.KerasRuntime.name,
      "status": STATUS_OK,
      **baseline_metrics,
      **file_sizes(scratch_dir, ["baseline.h5"]),
      # The trainer's file may also hold optimizer state; recorded, but not the ratio basis.
      "input_file": file_sizes(keras_model_dir, [MODEL_FILENAME]),
      "top1": baseline_probs.argmax(axis=1),
    }
    _release_memory()

    context = variant_lib.ConversionContext(
      baseline_h5=baseline_path,
      train_x=train_x,
      train_y=train_y,
      eval_x=eval_x,
      eval_y=eval_y,
      baseline_eval_probs=baseline_probs,
      config=config,
      scratch_dir=scratch_dir,
    )
    staging_dir = tempfile.mkdtemp(prefix=".staging-", dir=output_dir)
    try:
      entries = [
        _run_variant(variant_lib.create(name), context, staging_dir, baseline, config)
        for name in config.variant_names()
      ]
      for entry in entries:
        if entry["status"] == STATUS_OK:
          name = entry["name"]
          os.replace(os.path.join(staging_dir, name), os.path.join(output_dir, name))
    finally:
      shutil.rmtree(staging_dir, ignore_errors=True)

  del baseline["top1"]
  blessed = [e["name"] for e in entries if e["blessed"]]
  index = {"baseline": baseline, "variants": entries, "blessed_variants": blessed}
  index_path = os.path.join(output_dir, VARIANTS_INDEX_FILENAME)
  with open(index_path + ".tmp", "w") as f:
    json.dump(index, f, indent=2)
  os.replace(index_path + ".tmp", index_path)
  return {
    "status": STATUS_OK,
    "size_basis": SIZE_BASIS,
    "rows": {"train": len(train_x), "eval": len(eval_x)},
    "num_features": num_features,
    "num_classes": num_classes,
    "baseline": baseline,
    "variants": entries,
    "blessed_variants": blessed,
    "config": dataclasses.asdict(config),
    "host": _host(),
    "elapsed_seconds": round(time.perf_counter() - started, 3),
  }


def skipped_report(reason: str, config: OptimizerConfig | None = None) -> dict:
  """The report for a run that could not start, e.g. a model without a Format-Keras copy.

  Args:
    reason: why nothing was optimized; repeated on every variant.
    config: the options the run was given.

  Returns:
    A report of the same shape as optimize()'s, with every variant skipped.
  """
  config = config or OptimizerConfig()
  entries = [
    {"name": name, "status": STATUS_SKIPPED, "reason": reason, "blessed": False}
    for name in config.variant_names()
  ]
  return {
    "status": STATUS_SKIPPED,
    "reason": reason,
    "size_basis": SIZE_BASIS,
    "baseline": {"name": "baseline", "status": STATUS_SKIPPED, "reason": reason},
    "variants": entries,
    "blessed_variants": [],
    "config": dataclasses.asdict(config),
    "host": _host(),
  }
