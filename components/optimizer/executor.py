"""Executor of the Optimizer: reads the artifacts, calls optimizer_lib, records the blessings."""

import json
import os
from typing import Any

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils

from components.optimizer import examples_io, optimizer_lib, report, spec

SCHEMA_FILENAME = "schema.pbtxt"


def config_from_exec_properties(exec_properties: dict[str, Any]) -> optimizer_lib.OptimizerConfig:
  """Builds the optimizer options from the component's execution properties.

  Args:
    exec_properties: the Optimizer's parameters (see spec.OptimizerSpec.PARAMETERS).

  Returns:
    The validated OptimizerConfig.
  """
  defaults = optimizer_lib.OptimizerConfig()
  variants = exec_properties.get(spec.VARIANTS_KEY)
  config = optimizer_lib.OptimizerConfig(
    variants=tuple(json.loads(variants)) if variants else defaults.variants,
    tensorrt=exec_properties.get(spec.TENSORRT_KEY) or defaults.tensorrt,
    target_sparsity=float(exec_properties.get(spec.TARGET_SPARSITY_KEY, defaults.target_sparsity)),
    max_accuracy_drop=float(
      exec_properties.get(spec.MAX_ACCURACY_DROP_KEY, defaults.max_accuracy_drop)
    ),
    latency_runs=int(exec_properties.get(spec.LATENCY_RUNS_KEY, defaults.latency_runs)),
    fine_tune_epochs=int(exec_properties.get(spec.FINE_TUNE_EPOCHS_KEY, defaults.fine_tune_epochs)),
    int8_fallback=bool(int(exec_properties.get(spec.INT8_FALLBACK_KEY, 0))),
    max_train_rows=int(exec_properties.get(spec.MAX_TRAIN_ROWS_KEY, defaults.max_train_rows)),
    max_eval_rows=int(exec_properties.get(spec.MAX_EVAL_ROWS_KEY, defaults.max_eval_rows)),
  )
  config.validate()
  return config


def set_blessing_properties(optimized_model: types.Artifact, result: dict) -> None:
  """Records status, blessing and key metrics of every variant as custom properties.

  Args:
    optimized_model: the OptimizedModel output artifact.
    result: the optimizer report.
  """
  optimized_model.set_string_custom_property("optimizer_status", result["status"])
  optimized_model.set_string_custom_property(
    "blessed_variants", json.dumps(result["blessed_variants"])
  )
  baseline = result["baseline"]
  if baseline.get("status") == optimizer_lib.STATUS_OK:
    optimized_model.set_float_custom_property("baseline_accuracy", baseline["accuracy"])
  for entry in result["variants"]:
    name = entry["name"]
    optimized_model.set_int_custom_property(f"{name}_blessed", int(entry["blessed"]))
    optimized_model.set_string_custom_property(f"{name}_status", entry["status"])
    if entry["status"] == optimizer_lib.STATUS_OK:
      optimized_model.set_string_custom_property(f"{name}_path", entry["path"])
      optimized_model.set_float_custom_property(f"{name}_accuracy", entry["accuracy"])
      optimized_model.set_float_custom_property(
        f"{name}_accuracy_drop_pp", entry["accuracy_drop_pp"]
      )
      optimized_model.set_int_custom_property(f"{name}_size_bytes", entry["size_bytes"])
      optimized_model.set_int_custom_property(
        f"{name}_gzipped_size_bytes", entry["gzipped_size_bytes"]
      )
      optimized_model.set_float_custom_property(f"{name}_latency_ms_p50", entry["latency_ms_p50"])


class Executor(base_executor.BaseExecutor):
  """Runs optimizer_lib.optimize on the model's Format-Keras copy and the Examples splits."""

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    """Optimizes the model and writes the variants, the report and the blessing properties.

    Args:
      input_dict: MODEL_KEY, EXAMPLES_KEY and optionally SCHEMA_KEY artifacts.
      output_dict: OPTIMIZED_MODEL_KEY and REPORT_KEY artifacts.
      exec_properties: the parameters in spec.OptimizerSpec.PARAMETERS.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    config = config_from_exec_properties(exec_properties)
    model = artifact_utils.get_single_instance(input_dict[spec.MODEL_KEY])
    examples = artifact_utils.get_single_instance(input_dict[spec.EXAMPLES_KEY])
    optimized_model = artifact_utils.get_single_instance(output_dict[spec.OPTIMIZED_MODEL_KEY])
    report_artifact = artifact_utils.get_single_instance(output_dict[spec.REPORT_KEY])
    keras_dir = os.path.join(model.uri, spec.KERAS_MODEL_DIR)
    os.makedirs(optimized_model.uri, exist_ok=True)
    os.makedirs(report_artifact.uri, exist_ok=True)

    if not os.path.isfile(os.path.join(keras_dir, optimizer_lib.MODEL_FILENAME)):
      # A model from a stock run_fn has only Format-Serving; that is not an error of this run.
      reason = (
        f"model has no {spec.KERAS_MODEL_DIR}/{optimizer_lib.MODEL_FILENAME} (trained by a "
        "module that writes only Format-Serving); write the Keras copy to optimize it"
      )
      logging.warning("Optimizer skipped: %s.", reason)
      result = optimizer_lib.skipped_report(reason, config)
    else:
      input_spec = examples_io.read_input_spec(keras_dir)
      schema_list = input_dict.get(spec.SCHEMA_KEY)
      if schema_list:
        schema_path = os.path.join(artifact_utils.get_single_uri(schema_list), SCHEMA_FILENAME)
        examples_io.check_schema(schema_path, input_spec.feature_keys, input_spec.label_key)
      train_x, train_y = examples_io.read_split(
        artifact_utils.get_split_uri([examples], spec.TRAIN_SPLIT),
        input_spec.feature_keys,
        input_spec.label_key,
        max_rows=config.max_train_rows,
        seed=config.seed,
      )
      eval_x, eval_y = examples_io.read_split(
        artifact_utils.get_split_uri([examples], spec.EVAL_SPLIT),
        input_spec.feature_keys,
        input_spec.label_key,
        max_rows=config.max_eval_rows,
        seed=config.seed,
      )
      result = optimizer_lib.optimize(
        keras_dir, train_x, train_y, eval_x, eval_y, optimized_model.uri, config
      )

    paths = report.write_report(result, report_artifact.uri)
    set_blessing_properties(optimized_model, result)
    report_artifact.set_string_custom_property(
      "blessed_variants", json.dumps(result["blessed_variants"])
    )
    for entry in result["variants"]:
      if entry["status"] == optimizer_lib.STATUS_OK and not os.path.exists(
        os.path.join(optimized_model.uri, entry["path"])
      ):
        raise RuntimeError(f"Variant {entry['name']} reported ok but {entry['path']} is missing.")
    logging.info("Optimizer report: %s", paths[report.REPORT_MD])
