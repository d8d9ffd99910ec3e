"""Executor of the Optimizer: reads the artifacts, calls optimizer_lib, records the blessings."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import io_utils

from components import model_contract, storage, tf_compat
from components.artifact_files import variant_index
from components.optimizer import data_lib, optimizer_lib, report, spec
from components.optimizer.run_config import ModelFacts, OptimizerConfig
from core import defaults, properties

_LOG = logging.getLogger(__name__)


def config_from_exec_properties(exec_properties: dict[str, Any]) -> OptimizerConfig:
  """Builds the validated optimizer options from the component's execution properties."""
  d = OptimizerConfig()
  variants = exec_properties.get(spec.VARIANTS_KEY)

  def get(key, default, cast):
    value = exec_properties.get(key)
    return default if value in (None, "") else cast(value)

  config = OptimizerConfig(
    variants=tuple(json.loads(variants)) if variants else d.variants,
    tensorrt=exec_properties.get(spec.TENSORRT_KEY) or d.tensorrt,
    target_sparsity=get(spec.TARGET_SPARSITY_KEY, d.target_sparsity, float),
    max_accuracy_drop=get(spec.MAX_ACCURACY_DROP_KEY, d.max_accuracy_drop, float),
    min_agreement=get(spec.MIN_AGREEMENT_KEY, d.min_agreement, float),
    latency_runs=get(spec.LATENCY_RUNS_KEY, d.latency_runs, int),
    fine_tune_epochs=get(spec.FINE_TUNE_EPOCHS_KEY, d.fine_tune_epochs, int),
    max_train_rows=get(spec.MAX_TRAIN_ROWS_KEY, d.max_train_rows, int),
    max_eval_rows=get(spec.MAX_EVAL_ROWS_KEY, d.max_eval_rows, int),
  )
  config.validate()
  return config


def set_blessing_properties(optimized_model: types.Artifact, result: dict) -> None:
  """Records status and the blessed variants (the index file holds the rest)."""
  optimized_model.set_string_custom_property("optimizer_status", result["status"])
  optimized_model.set_string_custom_property(
    variant_index.KEY_BLESSED, json.dumps(result[variant_index.KEY_BLESSED])
  )


def _facts(model, serving_dir, reader, exec_properties) -> ModelFacts:
  contract = model_contract.read_contract(serving_dir)
  task = data_lib.model_task(contract, exec_properties.get(spec.TASK_KEY), model)
  label_key = exec_properties.get(spec.LABEL_KEY_KEY) or defaults.LABEL_KEY
  if contract is None:
    names = list(data_lib.input_specs(model))
    return ModelFacts(
      task=task,
      label_key=label_key,
      output=model_contract.output_meaning(task, ()) if task == "regression" else "",
      columns={n: [n] for n in names},
      preprocessing_included=reader.includes_preprocessing,
    )
  classes = tuple(contract.label.get("classes") or ())
  return ModelFacts(
    task=task,
    label_key=contract.label["key"],
    classes=classes,
    output=contract.output,
    columns={i["name"]: [c["column"] for c in i["columns"]] for i in contract.inputs},
    missing={i["name"]: i["missing_value"] for i in contract.inputs},
    preprocessing_included=contract.preprocessing_included,
    contract=contract,
  )


def _publish_folder(local_dir: str, uri: str) -> None:
  """Copies a finished local folder's files to an object-store artifact uri."""
  for root, _, files in os.walk(local_dir):
    for name in files:
      src = os.path.join(root, name)
      dst = os.path.join(uri, os.path.relpath(src, local_dir))
      fileio.makedirs(os.path.dirname(dst))
      io_utils.copy_file(src, dst, overwrite=True)


def _recorded_rows(examples: types.Artifact, split: str) -> int | None:
  """The split's row count as the kit's ExampleGen records it, or None (count it)."""
  key = properties.examples_rows(split)
  return int(examples.get_int_custom_property(key)) if examples.has_custom_property(key) else None


def _optimize(
  serving_dir: str,
  examples: types.Artifact,
  schema_path: str | None,
  transform_uri: str | None,
  out_dir: str,
  exec_properties: dict[str, Any],
  config: OptimizerConfig,
) -> dict:
  """Loads the model and its sample rows, then builds, measures and gates every variant.

  Raises:
    data_lib.UnmeasurableModelError: when the model cannot be converted or fed by name.
    data_lib.OptimizerInputError: when the inputs are wired or named wrongly (names the fix).
  """
  model = data_lib.load_keras_model(serving_dir)
  label_key = exec_properties.get(spec.LABEL_KEY_KEY) or defaults.LABEL_KEY
  reader = data_lib.RowReader(model, serving_dir, schema_path, label_key, transform_uri)
  train, train_info = data_lib.read_sample(
    reader,
    examples,
    properties.TRAIN_SPLIT,
    config.max_train_rows,
    config.seed,
    _recorded_rows(examples, properties.TRAIN_SPLIT),
  )
  evals, eval_info = data_lib.read_sample(
    reader,
    examples,
    properties.EVAL_SPLIT,
    config.max_eval_rows,
    config.seed,
    _recorded_rows(examples, properties.EVAL_SPLIT),
  )
  facts = _facts(model, serving_dir, reader, exec_properties)
  sampling = {
    properties.TRAIN_SPLIT: dataclasses.asdict(train_info),
    properties.EVAL_SPLIT: dataclasses.asdict(eval_info),
  }
  return optimizer_lib.optimize(
    model, train.inputs, evals.inputs, evals.labels, out_dir, facts, config, sampling
  )


class Executor(base_executor.BaseExecutor):
  """Optimizes the Trainer's Keras model on the Examples' rows and writes variants + report."""

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    """Optimizes the model and writes the variants, the index, the report and the blessings.

    Args:
      input_dict: model, examples, and optionally schema and transform_graph.
      output_dict: optimized_model and report.
      exec_properties: the parameters in spec.OptimizerSpec.PARAMETERS.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    tf_compat.apply()
    config = config_from_exec_properties(exec_properties)
    model_artifact = artifact_utils.get_single_instance(input_dict[spec.MODEL_KEY])
    examples = artifact_utils.get_single_instance(input_dict[spec.EXAMPLES_KEY])
    optimized_model = artifact_utils.get_single_instance(output_dict[spec.OPTIMIZED_MODEL_KEY])
    report_artifact = artifact_utils.get_single_instance(output_dict[spec.REPORT_KEY])
    schema = input_dict.get(spec.SCHEMA_KEY)
    schema_path = (
      io_utils.get_only_uri_in_dir(artifact_utils.get_single_uri(schema)) if schema else None
    )
    transform = input_dict.get(spec.TRANSFORM_GRAPH_KEY)
    transform_uri = artifact_utils.get_single_uri(transform) if transform else None

    with tempfile.TemporaryDirectory(prefix="optimizer-") as scratch:
      # Converters and runtimes work on local files: object-store artifacts are copied in
      # and the results copied out.
      remote = storage.is_remote(optimized_model.uri)
      out_dir = os.path.join(scratch, "out") if remote else optimized_model.uri
      report_dir = os.path.join(scratch, "report") if remote else report_artifact.uri
      os.makedirs(out_dir, exist_ok=True)
      os.makedirs(report_dir, exist_ok=True)
      serving_dir = storage.localize(model_contract.serving_dir(model_artifact.uri), scratch)
      # The module that built the model registers its custom Keras layers when imported.
      model_contract.import_trainer_module(
        model_artifact.get_string_custom_property(properties.TRAINER_MODULE_PROPERTY)
      )
      try:
        result = _optimize(
          serving_dir, examples, schema_path, transform_uri, out_dir, exec_properties, config
        )
      except data_lib.UnmeasurableModelError as e:
        # A model the Optimizer cannot load or feed (inputs not named after features, no
        # call function) keeps its pipeline: every variant is skipped with the reason, and the
        # Pusher ships the trained model alone.
        _LOG.warning("Optimizer skipped: %s", e)
        result = optimizer_lib.skipped_report(str(e), config)
      paths = report.write_report(result, report_dir)
      if remote:
        _publish_folder(out_dir, optimized_model.uri)
        _publish_folder(report_dir, report_artifact.uri)
    set_blessing_properties(optimized_model, result)
    report_artifact.set_string_custom_property(
      variant_index.KEY_BLESSED, json.dumps(result[variant_index.KEY_BLESSED])
    )
    for entry in result[variant_index.KEY_VARIANTS]:
      if entry["status"] == variant_index.STATUS_OK and not fileio.exists(
        os.path.join(optimized_model.uri, entry["path"])
      ):
        raise RuntimeError(f"Variant {entry['name']} reported ok but {entry['path']} is missing.")
    _LOG.info("Optimizer report: %s", paths[report.REPORT_MD])
