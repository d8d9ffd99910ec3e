"""Plain-Python core of the Optimizer: convert each variant, measure it, gate it, index it.

Works on any Keras model with named inputs and any task: classification variants are judged
by accuracy and top-1 agreement with the baseline, regression variants by RMSE and agreement
within a tolerance. Every variant folder gets a `signature.json` (the input contract a client
needs: names, order, dtypes, shapes, quantization, missing values, label classes), and the
folder's index `variants.json` is the one place the Pusher reads (see `read_index`).
"""

from __future__ import annotations

import dataclasses
import gc
import gzip
import json
import logging
import os
import platform
import shutil
import tempfile
import time
from typing import Any

import numpy as np
import tensorflow as tf

from components import defaults, tasks
from components.errors import UserInputError
from components.optimizer import conversions, runtimes, tensorrt_lib
from components.optimizer import variants as variant_lib

_LOG = logging.getLogger(__name__)

# The output index: one file beside the variant folders, read by the Pusher via read_index().
INDEX_FILE = "variants.json"
SIGNATURE_FILE = "signature.json"
INDEX_FORMAT = "tfx-pipeline-kit.optimizer-index/1"
SIGNATURE_FORMAT = "tfx-pipeline-kit.variant-signature/1"
KEY_VARIANTS = "variants"
KEY_BLESSED = "blessed_variants"
KEY_BASELINE = "baseline"

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"

VARIANT_ORDER = defaults.VARIANTS
DEFAULT_VARIANTS = defaults.DEFAULT_VARIANTS

SIZE_BASIS = (
  "baseline size = the Keras h5 file of the trained model without optimizer state (weights "
  "and architecture); variant sizes are their model files (pruned: its whole SavedModel, "
  "graph and signatures included); gzipped = gzip level 9 in memory"
)
RESTORED_SIZE_BASIS = (
  "baseline size = an h5 file of the trained model's weights (run_fn saved it with "
  "tf.saved_model.save, which keeps no Keras architecture); variant sizes are their model "
  "files; gzipped = gzip level 9 in memory"
)
# Converter messages can run to pages of MLIR; the report keeps the head, the log keeps all.
MAX_REASON_CHARS = 2000
# Regression agreement: a prediction agrees when it is within this share of the label's standard
# deviation of the baseline's (int8's rounding of a price model moves it by about 1%).
REGRESSION_AGREEMENT_TOLERANCE = 0.1
# Two-sided 95% normal quantile, for the confidence intervals of the eval sample's metrics.
_Z95 = 1.959964


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """Options of one optimize() run.

  Attributes:
    variants: variant names to run (see VARIANT_ORDER). `tensorrt_fp16` may be listed but is
      switched by `tensorrt` alone. With tensorrt 'auto' or 'required', `onnx` runs too, since
      the engine is built from the checked ONNX export.
    tensorrt: 'off', 'auto' (build an FP16 engine when the tensorrt package and a CUDA GPU
      are present, else record why not) or 'required' (fail when they are not).
    target_sparsity: fraction of kernel weights the `pruned` variants zero.
    max_accuracy_drop: a variant is blessed only if its metric is at most this many points
      worse than the baseline's: accuracy percentage points for classification, percent of the
      RMSE for regression.
    min_agreement: ... and only if it agrees with the baseline on at least this share of the
      eval rows (same class; for regression within REGRESSION_AGREEMENT_TOLERANCE of the label's
      standard deviation).
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

  variants: tuple[str, ...] = DEFAULT_VARIANTS
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
    for name in self.variants:
      if name not in variant_lib.VARIANTS:
        raise UserInputError(
          f"Unknown optimizer variant {name!r}; choose from {sorted(variant_lib.VARIANTS)}."
        )
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
    selected = set(self.variants) - {variant_lib.TENSORRT_FP16}
    if self.tensorrt != defaults.TENSORRT_OFF:
      selected.update((variant_lib.ONNX, variant_lib.TENSORRT_FP16))
    ordered = [name for name in VARIANT_ORDER if name in selected]
    # Variants registered outside this module (extensions) run after the built-in ones.
    return ordered + [name for name in self.variants if name not in VARIANT_ORDER]


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


class _Judge:
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
  runtime: runtimes.Runtime, inputs: runtimes.Inputs, runs: int, warmup_runs: int
) -> dict:
  """Times single-example predictions: p50, p90 and the number of timed runs."""
  n = min(runtimes.rows(inputs), runs + warmup_runs)
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


def _short(error: BaseException) -> str:
  text = f"{type(error).__name__}: {error}"
  return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + " [...]"


def _release_memory() -> None:
  """Drops graphs and objects one variant left behind before the next one starts."""
  tf.keras.backend.clear_session()
  gc.collect()


def signature_document(
  variant: str, runtime: runtimes.Runtime, model_file: str, facts: ModelFacts
) -> dict[str, Any]:
  """The input/output contract of one variant, as written to its signature.json."""
  described = runtime.signature()
  inputs = []
  for position, described_input in enumerate(described.get("inputs", [])):
    entry = dict(described_input)
    entry["position"] = position
    entry["columns"] = facts.columns.get(entry["name"], [entry["name"]])
    if entry["name"] in facts.missing:
      entry["missing_value"] = facts.missing[entry["name"]]
    inputs.append(entry)
  doc = {
    "format": SIGNATURE_FORMAT,
    "variant": variant,
    "runtime": runtime.name,
    "model_file": model_file,
    "inputs": inputs,
    "outputs": described.get("outputs", []),
    "task": facts.task,
    "label": {"key": facts.label_key, "classes": list(facts.classes)},
    "output_meaning": facts.output,
    "preprocessing_included": facts.preprocessing_included,
  }
  if "signature_key" in described:
    doc["signature_key"] = described["signature_key"]
  if not facts.preprocessing_included:
    doc["transform_graph"] = (
      "this variant takes transformed features: run the shipped transform graph "
      "(tft.TFTransformOutput(...).transform_features_layer()) on raw features first"
    )
  return doc


def _run_variant(
  variant: variant_lib.Variant,
  context: variant_lib.ConversionContext,
  staging_dir: str,
  judge: _Judge,
  baseline: dict,
  facts: ModelFacts,
  config: OptimizerConfig,
  position: tuple[int, int],
) -> dict:
  """Converts, measures and gates one variant; a failure is recorded, never raised."""
  entry: dict[str, Any] = {"name": variant.name, "runtime": variant.runtime}
  _LOG.info("Optimizer variant %s (%d/%d)", variant.name, *position)
  reason = variant.skip_reason(context)
  if reason:
    _LOG.info("Optimizer variant %s skipped: %s", variant.name, reason)
    return {**entry, "status": STATUS_SKIPPED, "reason": reason, "blessed": False}
  out_dir = os.path.join(staging_dir, variant.name)
  os.makedirs(out_dir)
  runtime = None
  started = time.perf_counter()
  try:
    conversion = variant.convert(context, out_dir)
    convert_seconds = time.perf_counter() - started
    runtime = variant.load(out_dir, conversion)
    outputs = runtimes.predict_batched(runtime, context.eval_inputs)
    metrics = judge.metrics(outputs)
    metrics.update(
      batch1_latency_ms(runtime, context.eval_inputs, config.latency_runs, config.warmup_runs)
    )
    signature = signature_document(variant.name, runtime, conversion.model_files[0], facts)
    with open(os.path.join(out_dir, SIGNATURE_FILE), "w") as f:
      json.dump(signature, f, indent=2)
  except Exception as error:  # One variant's failure must not stop the others.
    _LOG.exception("Optimizer variant %s failed.", variant.name)
    shutil.rmtree(out_dir, ignore_errors=True)
    return {**entry, "status": STATUS_FAILED, "reason": _short(error), "blessed": False}
  finally:
    if runtime is not None:
      runtime.close()
    del runtime
    # Fine-tuning leaves graphs behind; a collection after every variant would cost more
    # than all the conversions (gc.collect takes ~0.4 s with TensorFlow loaded).
    if variant.builds_models:
      _release_memory()
  entry.update(
    status=STATUS_OK,
    path=os.path.join(variant.name, conversion.model_files[0]),
    files=[os.path.join(variant.name, f) for f in (*conversion.model_files, SIGNATURE_FILE)],
    convert_seconds=round(convert_seconds, 3),
    **metrics,
    **file_sizes(out_dir, conversion.model_files),
  )
  entry["ratios"] = {
    key: (entry[key] / baseline[key] if baseline.get(key) else None)
    for key in ("metric_value", "size_bytes", "gzipped_size_bytes", "latency_ms_p50")
  }
  entry["blessed"], entry["metric_drop"], why_not = judge.gate(
    metrics, baseline["metric_value"], config
  )
  if why_not:
    entry["gate_reason"] = why_not
  entry["details"] = conversion.details
  entry["preprocessing_included"] = facts.preprocessing_included
  entry["select_tf_ops"] = bool(conversion.details.get("select_tf_ops", False))
  entry["signature"] = signature
  _LOG.info(
    "Optimizer variant %s: %s %.4f, %d bytes, p50 %.3f ms, blessed=%s",
    variant.name,
    judge.metric_name,
    entry["metric_value"],
    entry["size_bytes"],
    entry["latency_ms_p50"],
    entry["blessed"],
  )
  return entry


def _host() -> dict:
  return {
    "platform": platform.platform(),
    "cpu_count": os.cpu_count(),
    "tensorflow": tf.__version__,
  }


def optimize(
  model,
  train_inputs: runtimes.Inputs,
  eval_inputs: runtimes.Inputs,
  eval_labels: np.ndarray,
  output_dir: str,
  facts: ModelFacts,
  config: OptimizerConfig | None = None,
  sampling: dict[str, Any] | None = None,
) -> dict:
  """Builds every configured variant of a Keras model, measures and gates each.

  Each variant is written to `output_dir/<variant>/` with its signature.json; variants that
  fail or are skipped leave no folder, and their row gives the reason. `output_dir/variants.json`
  indexes them. Nothing is written to `output_dir` if the baseline cannot be measured.

  Args:
    model: the trained Keras model (its inputs named as the keys of the input dicts).
    train_inputs: train sample for fine-tuning and calibration.
    eval_inputs: eval rows.
    eval_labels: eval labels, as the model is trained against them.
    output_dir: existing folder receiving one sub-folder per variant.
    facts: task, label and input contract (see ModelFacts).
    config: options; defaults to OptimizerConfig().
    sampling: how the train and eval rows were drawn from their splits (data_lib.SampleInfo
      as dicts, by split), recorded in the report.

  Returns:
    The report: baseline and per-variant metrics, blessings and the config.

  Raises:
    UserInputError: for bad options or data that does not fit the model.
    tensorrt_lib.TensorRTUnavailableError: with tensorrt='required' on a host that cannot
      build TensorRT engines.
  """
  config = config or OptimizerConfig()
  config.validate()
  started = time.perf_counter()
  if config.tensorrt == defaults.TENSORRT_REQUIRED:
    reason = tensorrt_lib.unavailable_reason()
    if reason:
      raise tensorrt_lib.TensorRTUnavailableError(
        f"tensorrt='required' but {reason}; run on a CUDA host with TensorRT or pass "
        "tensorrt='auto'."
      )
  if not runtimes.rows(eval_inputs) or not runtimes.rows(train_inputs):
    raise UserInputError("the train or eval sample is empty; the Optimizer needs both splits.")
  tf.keras.utils.set_random_seed(config.seed)

  restored = conversions.restored_call(model) is not None
  with tempfile.TemporaryDirectory(prefix="optimizer-scratch-") as scratch_dir:
    baseline_path = os.path.join(scratch_dir, "baseline.h5")
    model.save(baseline_path, include_optimizer=False)
    runtime = runtimes.KerasRuntime(model)
    baseline_outputs = runtimes.predict_batched(runtime, eval_inputs)
    train_targets = runtimes.predict_batched(runtime, train_inputs)
    judge = _Judge(facts.task, eval_labels, baseline_outputs)
    baseline = {
      "name": "baseline",
      "runtime": runtimes.KerasRuntime.name,
      "status": STATUS_OK,
      **judge.metrics(baseline_outputs, baseline=True),
      "ci95": round(judge.confidence(baseline_outputs), 4),
      **batch1_latency_ms(runtime, eval_inputs, config.latency_runs, config.warmup_runs),
      **file_sizes(scratch_dir, ["baseline.h5"]),
    }
    runtime.close()
    _release_memory()

    context = variant_lib.ConversionContext(
      baseline_path=baseline_path,
      train_inputs=train_inputs,
      train_targets=train_targets,
      eval_inputs=eval_inputs,
      baseline_eval_outputs=baseline_outputs,
      config=config,
      scratch_dir=scratch_dir,
      restored_baseline=model if restored else None,
      contract=facts.contract,
    )
    names = config.variant_names()
    staging_dir = tempfile.mkdtemp(prefix=".staging-", dir=output_dir)
    try:
      entries = [
        _run_variant(
          variant_lib.create(name),
          context,
          staging_dir,
          judge,
          baseline,
          facts,
          config,
          (i + 1, len(names)),
        )
        for i, name in enumerate(names)
      ]
      for entry in entries:
        if entry["status"] == STATUS_OK:
          name = entry["name"]
          os.replace(os.path.join(staging_dir, name), os.path.join(output_dir, name))
    finally:
      shutil.rmtree(staging_dir, ignore_errors=True)

  blessed = [e["name"] for e in entries if e["blessed"]]
  report = {
    "status": STATUS_OK,
    "task": facts.task,
    "metric": judge.metric_name,
    "size_basis": RESTORED_SIZE_BASIS if restored else SIZE_BASIS,
    "rows": {"train": runtimes.rows(train_inputs), "eval": runtimes.rows(eval_inputs)},
    "sampling": sampling or {},
    "preprocessing_included": facts.preprocessing_included,
    KEY_BASELINE: baseline,
    KEY_VARIANTS: entries,
    KEY_BLESSED: blessed,
    "config": dataclasses.asdict(config),
    "host": _host(),
    "elapsed_seconds": round(time.perf_counter() - started, 3),
  }
  write_index(output_dir, report)
  return report


def skipped_report(reason: str, config: OptimizerConfig | None = None) -> dict:
  """The report for a run that could not start (e.g. a model that is not a Keras model).

  Every variant row carries the reason.
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
    KEY_BASELINE: {"name": "baseline", "status": STATUS_SKIPPED, "reason": reason},
    KEY_VARIANTS: entries,
    KEY_BLESSED: [],
    "config": dataclasses.asdict(config),
    "host": _host(),
  }


def write_index(output_dir: str, report: dict) -> str:
  """Writes `variants.json`, the index the Pusher reads, atomically."""
  index = {
    "format": INDEX_FORMAT,
    "task": report.get("task"),
    "preprocessing_included": report.get("preprocessing_included", True),
    KEY_BASELINE: report[KEY_BASELINE],
    KEY_VARIANTS: {e["name"]: e for e in report[KEY_VARIANTS]},
    KEY_BLESSED: report[KEY_BLESSED],
  }
  path = os.path.join(output_dir, INDEX_FILE)
  with tf.io.gfile.GFile(path + ".tmp", "w") as f:
    f.write(json.dumps(index, indent=2))
  tf.io.gfile.rename(path + ".tmp", path, overwrite=True)
  return path


@dataclasses.dataclass(frozen=True)
class BlessedVariant:
  """A variant the Pusher may ship.

  Attributes:
    name: the variant name (its folder under the OptimizedModel uri).
    folder: the variant's folder.
    metrics: what the manifest records about it.
    signature: its signature.json content.
  """

  name: str
  folder: str
  metrics: dict[str, Any]
  signature: dict[str, Any]


def read_index(optimized_model_uri: str) -> tuple[dict[str, Any], list[BlessedVariant]]:
  """Reads an OptimizedModel's index: the whole index and its blessed variants.

  Returns:
    (index, blessed variants); ({}, []) when there is no index (nothing was optimized).

  Raises:
    RuntimeError: when a blessed variant has no folder (a broken artifact).
  """
  path = os.path.join(optimized_model_uri, INDEX_FILE)
  if not tf.io.gfile.exists(path):
    return {}, []
  with tf.io.gfile.GFile(path) as f:
    index = json.loads(f.read())
  blessed = []
  for name in index.get(KEY_BLESSED, []):
    entry = index[KEY_VARIANTS][name]
    folder = os.path.join(optimized_model_uri, name)
    if not tf.io.gfile.exists(folder):
      raise RuntimeError(
        f"the Optimizer's index lists blessed variant {name!r} but {folder} is missing"
      )
    metrics = {
      k: entry[k]
      for k in (
        "runtime",
        "path",
        "metric_value",
        "metric_drop",
        "accuracy",
        "rmse",
        "agreement",
        "size_bytes",
        "gzipped_size_bytes",
        "latency_ms_p50",
        "preprocessing_included",
        "select_tf_ops",
      )
      if k in entry
    }
    blessed.append(BlessedVariant(name, folder, metrics, entry.get("signature", {})))
  return index, blessed
