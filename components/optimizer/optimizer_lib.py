"""Plain-Python core of the Optimizer: convert each variant, measure it, gate it, index it."""

from __future__ import annotations

import dataclasses
import gc
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

from components.artifact_files.variant_index import (
  KEY_BASELINE,
  KEY_BLESSED,
  KEY_VARIANTS,
  STATUS_FAILED,
  STATUS_OK,
  STATUS_SKIPPED,
  write_index,
)
from components.optimizer import formats
from components.optimizer.formats import keras_model, runtime_base
from components.optimizer.formats import tensorrt as tensorrt_format
from components.optimizer.formats.variant_base import ConversionContext, ConversionRefused, Variant
from components.optimizer.measurement import Judge, batch1_latency_ms, file_sizes
from components.optimizer.run_config import ModelFacts, OptimizerConfig
from components.optimizer.signature import SIGNATURE_FILE, signature_document
from core import defaults, properties
from core.errors import UserInputError

_LOG = logging.getLogger(__name__)

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


def _short(error: BaseException) -> str:
  text = f"{type(error).__name__}: {error}"
  return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + " [...]"


def _release_memory() -> None:
  """Drops graphs and objects one variant left behind before the next one starts."""
  tf.keras.backend.clear_session()
  gc.collect()


def _gate(entry: dict, metrics: dict, judge: Judge, baseline: dict, config) -> None:
  """Adds a measured variant's ratios to the baseline and the gate's verdict to its row."""
  entry["ratios"] = {
    key: (entry[key] / baseline[key] if baseline.get(key) else None)
    for key in ("metric_value", "size_bytes", "gzipped_size_bytes", "latency_ms_p50")
  }
  entry["blessed"], entry["metric_drop"], why_not = judge.gate(
    metrics, baseline["metric_value"], config
  )
  if why_not:
    entry["gate_reason"] = why_not


def _run_variant(
  variant: Variant,
  context: ConversionContext,
  staging_dir: str,
  judge: Judge,
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
    outputs = runtime_base.predict_batched(runtime, context.eval_inputs)
    metrics = judge.metrics(outputs)
    metrics.update(
      batch1_latency_ms(runtime, context.eval_inputs, config.latency_runs, config.warmup_runs)
    )
    signature = signature_document(variant.name, runtime, conversion.model_files[0], facts)
    with open(os.path.join(out_dir, SIGNATURE_FILE), "w") as f:
      json.dump(signature, f, indent=2)
  except ConversionRefused as refused:  # Known not to work: a skip, with the fix.
    _LOG.info("Optimizer variant %s skipped: %s", variant.name, refused)
    shutil.rmtree(out_dir, ignore_errors=True)
    return {**entry, "status": STATUS_SKIPPED, "reason": str(refused), "blessed": False}
  except Exception as error:  # One variant's failure must not stop the others.
    _LOG.exception("Optimizer variant %s failed.", variant.name)
    shutil.rmtree(out_dir, ignore_errors=True)
    return {**entry, "status": STATUS_FAILED, "reason": _short(error), "blessed": False}
  finally:
    if runtime is not None:
      runtime.close()
    del runtime
    # Fine-tuning leaves graphs behind; a collection after every variant would cost more
    # than all the conversions, as gc.collect walks every TensorFlow object.
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
  _gate(entry, metrics, judge, baseline, config)
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


def _check_can_start(
  config: OptimizerConfig, train_inputs: runtime_base.Inputs, eval_inputs: runtime_base.Inputs
) -> None:
  """Fails before any work when TensorRT is required but missing, or a sample is empty."""
  if config.tensorrt == defaults.TENSORRT_REQUIRED:
    tensorrt_format.check_required()
  if not runtime_base.rows(eval_inputs) or not runtime_base.rows(train_inputs):
    raise UserInputError("the train or eval sample is empty; the Optimizer needs both splits.")


def _measure_baseline(
  model,
  train_inputs: runtime_base.Inputs,
  eval_inputs: runtime_base.Inputs,
  eval_labels: np.ndarray,
  facts: ModelFacts,
  config: OptimizerConfig,
  scratch_dir: str,
) -> tuple[dict, Judge, ConversionContext]:
  """Saves and measures the trained model, which every variant is then compared with.

  Returns:
    (the baseline's report row, the judge of the variants' outputs, the context the variants
    convert from: the saved baseline and its outputs on both samples).
  """
  baseline_path = os.path.join(scratch_dir, "baseline.h5")
  model.save(baseline_path, include_optimizer=False)
  runtime = runtime_base.KerasRuntime(model)
  baseline_outputs = runtime_base.predict_batched(runtime, eval_inputs)
  train_targets = runtime_base.predict_batched(runtime, train_inputs)
  judge = Judge(facts.task, eval_labels, baseline_outputs)
  baseline = {
    "name": "baseline",
    "runtime": runtime_base.KerasRuntime.name,
    "status": STATUS_OK,
    **judge.metrics(baseline_outputs, baseline=True),
    "ci95": round(judge.confidence(baseline_outputs), 4),
    **batch1_latency_ms(runtime, eval_inputs, config.latency_runs, config.warmup_runs),
    **file_sizes(scratch_dir, [os.path.basename(baseline_path)]),
  }
  runtime.close()
  _release_memory()
  context = ConversionContext(
    baseline_path=baseline_path,
    train_inputs=train_inputs,
    train_targets=train_targets,
    eval_inputs=eval_inputs,
    baseline_eval_outputs=baseline_outputs,
    config=config,
    scratch_dir=scratch_dir,
    restored_baseline=model if keras_model.restored_call(model) is not None else None,
    contract=facts.contract,
  )
  return baseline, judge, context


def _run_variants(
  context: ConversionContext,
  output_dir: str,
  judge: Judge,
  baseline: dict,
  facts: ModelFacts,
  config: OptimizerConfig,
) -> list[dict]:
  """Runs every configured variant in a staging folder, then moves the finished ones in.

  Staging keeps `output_dir` free of half-written folders when a variant fails or the run dies.
  """
  names = config.variant_names()
  staging_dir = tempfile.mkdtemp(prefix=".staging-", dir=output_dir)
  try:
    entries = [
      _run_variant(
        formats.create(name),
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
  return entries


def optimize(
  model,
  train_inputs: runtime_base.Inputs,
  eval_inputs: runtime_base.Inputs,
  eval_labels: np.ndarray,
  output_dir: str,
  facts: ModelFacts,
  config: OptimizerConfig | None = None,
  sampling: dict[str, Any] | None = None,
) -> dict:
  """Builds every configured variant of a Keras model, measures and gates each.

  Works on any Keras model with named inputs and any task: classification variants are judged
  by accuracy and top-1 agreement with the baseline, regression variants by RMSE and agreement
  within a tolerance (see `measurement`).

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
    tensorrt_format.TensorRTUnavailableError: with tensorrt='required' on a host that cannot
      build TensorRT engines.
  """
  config = config or OptimizerConfig()
  config.validate()
  started = time.perf_counter()
  _check_can_start(config, train_inputs, eval_inputs)
  tf.keras.utils.set_random_seed(config.seed)
  with tempfile.TemporaryDirectory(prefix="optimizer-scratch-") as scratch_dir:
    baseline, judge, context = _measure_baseline(
      model, train_inputs, eval_inputs, eval_labels, facts, config, scratch_dir
    )
    entries = _run_variants(context, output_dir, judge, baseline, facts, config)
  report = {
    "status": STATUS_OK,
    "task": facts.task,
    "metric": judge.metric_name,
    "size_basis": RESTORED_SIZE_BASIS if context.restored_baseline is not None else SIZE_BASIS,
    "rows": {
      properties.TRAIN_SPLIT: runtime_base.rows(train_inputs),
      properties.EVAL_SPLIT: runtime_base.rows(eval_inputs),
    },
    "sampling": sampling or {},
    "preprocessing_included": facts.preprocessing_included,
    KEY_BASELINE: baseline,
    KEY_VARIANTS: entries,
    KEY_BLESSED: [e["name"] for e in entries if e["blessed"]],
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
