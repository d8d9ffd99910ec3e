"""DistributedTrainer executor: TFX's GenericExecutor plus strategies and local clusters."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from typing import Any

import attr
from tfx import types
from tfx.components.trainer import executor as trainer_executor
from tfx.components.trainer import fn_args_utils
from tfx.components.util import udf_utils
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs

import components
from components.distributed_trainer import anomalies_lib, constants, launch, strategy_lib
from components.distributed_trainer import distributed_trainer_lib as lib

_LOG = logging.getLogger(__name__)


@attr.s
class DistributedFnArgs(fn_args_utils.FnArgs):
  """Stock FnArgs plus the strategy built for this process.

  Attributes:
    strategy: the tf.distribute.Strategy (run_fn runs inside its scope).
    cluster_coordinator: ClusterCoordinator under parameter_server, else None.
    strategy_name: chosen strategy name.
    strategy_reason: why it was chosen.
    is_chief: whether this process must export (non-chiefs get a scratch serving_model_dir).
    task_type: TF_CONFIG task type ('chief' without a cluster).
    task_index: TF_CONFIG task index.
    global_batch_size: examples per step over all replicas.
    mixed_precision: '', 'mixed_float16' or 'mixed_bfloat16'.
  """

  strategy = attr.ib(type=Any, default=None)
  cluster_coordinator = attr.ib(type=Any, default=None)
  strategy_name = attr.ib(type=str, default=None)
  strategy_reason = attr.ib(type=str, default=None)
  is_chief = attr.ib(type=bool, default=True)
  task_type = attr.ib(type=str, default="chief")
  task_index = attr.ib(type=int, default=0)
  global_batch_size = attr.ib(type=int, default=lib.DEFAULT_GLOBAL_BATCH_SIZE)
  mixed_precision = attr.ib(type=str, default="")


def _prop(exec_properties: dict[str, Any], key: str, default: Any) -> Any:
  value = exec_properties.get(key)
  return default if value in (None, "") else value


class Executor(trainer_executor.GenericExecutor):
  """Runs a run_fn or build_model module under the chosen strategy, locally or as a cluster."""

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    """Trains in this process, or launches a local cluster, then records the result.

    Args:
      input_dict: stock Trainer inputs (examples, schema, base_model, ...).
      output_dict: `model` and `model_run`.
      exec_properties: stock Trainer properties plus the keys in `constants`.

    Raises:
      RuntimeError: when no serving model was written.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    anomalies_lib.check_no_anomalies(input_dict.get(constants.ANOMALIES_KEY) or [])
    workers = int(_prop(exec_properties, constants.LOCAL_WORKERS_KEY, 0))
    num_ps = int(_prop(exec_properties, constants.LOCAL_PS_KEY, 0))
    restarts = 0
    if workers or num_ps:
      result, restarts = self._run_local_cluster(
        input_dict, output_dict, exec_properties, workers, num_ps
      )
    else:
      result = self.train(input_dict, output_dict, exec_properties)
    model = artifact_utils.get_single_instance(output_dict[standard_component_specs.MODEL_KEY])
    _record(model, result, num_workers=max(workers, 1), restarts=restarts)
    serving_dir = os.path.join(model.uri, lib.SERVING_DIR)
    if not fileio.exists(serving_dir):
      raise RuntimeError(f"training finished without writing a serving model to {serving_dir}.")
    _LOG.info("Training complete. Model written to %s.", serving_dir)

  def train(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
    attempt: int = 0,
  ) -> lib.TrainResult:
    """Trains in this process under the strategy for its TF_CONFIG (also used by workers).

    Args:
      input_dict: resolved input artifacts.
      output_dict: output artifacts.
      exec_properties: execution properties.
      attempt: restart count of the surrounding local cluster.

    Returns:
      This process's TrainResult.

    Raises:
      ValueError: when the module defines neither run_fn nor build_model.
    """
    lib.skip_autograph_for_tf_keras()
    built = strategy_lib.build_strategy(
      _prop(exec_properties, constants.STRATEGY_KEY, strategy_lib.AUTO)
    )
    fn_args = self._GetFnArgs(input_dict, output_dict, exec_properties)
    fn_args = DistributedFnArgs(
      **attr.asdict(fn_args, recurse=False),
      strategy=built.strategy,
      cluster_coordinator=built.cluster_coordinator,
      strategy_name=built.choice.name,
      strategy_reason=built.choice.reason,
      is_chief=built.is_chief,
      task_type=built.task_type,
      task_index=built.task_index,
      global_batch_size=int(
        _prop(exec_properties, constants.GLOBAL_BATCH_SIZE_KEY, lib.DEFAULT_GLOBAL_BATCH_SIZE)
      ),
      mixed_precision=_prop(exec_properties, constants.MIXED_PRECISION_KEY, ""),
    )
    run_fn = udf_utils.try_get_fn(exec_properties, constants.RUN_FN)
    if run_fn is not None:
      return _train_run_fn(run_fn, fn_args, built, attempt)
    build_model = udf_utils.try_get_fn(exec_properties, constants.BUILD_MODEL_FN)
    if build_model is None:
      raise ValueError(
        "the trainer module defines neither run_fn(fn_args) nor build_model(hparams); add one "
        "of them to the module_file"
      )
    config = _train_config(fn_args, exec_properties, output_dict)
    return lib.train_build_model(build_model, config, built, attempt=attempt)

  def _run_local_cluster(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
    workers: int,
    num_ps: int,
  ) -> tuple[lib.TrainResult, int]:
    model_run_dir = artifact_utils.get_single_uri(
      output_dict[standard_component_specs.MODEL_RUN_KEY]
    )
    spec_path = lib.run_state_dir(model_run_dir, "spec.json")
    os.makedirs(os.path.dirname(spec_path), exist_ok=True)
    with open(spec_path, "w") as f:
      json.dump(
        {
          "input_dict": artifact_utils.jsonify_artifact_dict(input_dict),
          "output_dict": artifact_utils.jsonify_artifact_dict(output_dict),
          "exec_properties": exec_properties,
        },
        f,
      )
    # The workers import this package by module path, so they need its parent on their path.
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(components.__file__)))
    python_path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    run = launch.run_local_cluster(
      [sys.executable, "-m", "components.distributed_trainer.worker", "--spec", spec_path],
      num_workers=workers,
      num_ps=num_ps,
      log_dir=lib.run_state_dir(model_run_dir, "cluster_logs"),
      timeout_s=float(
        _prop(exec_properties, constants.WORKER_TIMEOUT_KEY, constants.DEFAULT_WORKER_TIMEOUT_S)
      ),
      max_restarts=int(
        _prop(exec_properties, constants.MAX_RESTARTS_KEY, constants.DEFAULT_MAX_RESTARTS)
      ),
      env={"PYTHONPATH": python_path, "TF_USE_LEGACY_KERAS": "1"},
    )
    chief_type = "chief" if num_ps else "worker"
    result = lib.read_result(lib.result_path(model_run_dir, chief_type, 0))
    return result, run.restarts


def _train_run_fn(run_fn, fn_args: DistributedFnArgs, built, attempt: int) -> lib.TrainResult:
  """Runs a stock run_fn inside the strategy scope; non-chiefs save to a scratch folder."""
  scratch = None
  if not built.is_chief:
    # Stock modules save unconditionally, and a distributed save must run on every worker,
    # so non-chiefs save to a private folder that is removed afterwards.
    scratch = lib.run_state_dir(
      fn_args.model_run_dir, "scratch", f"{built.task_type}-{built.task_index}"
    )
    fn_args.serving_model_dir = os.path.join(scratch, lib.SERVING_DIR)
  if built.choice.name == strategy_lib.MULTI_WORKER_MIRRORED:
    files = min(len(lib.list_files(fn_args.train_files)), len(lib.list_files(fn_args.eval_files)))
    if files < built.num_workers:
      _LOG.info(
        "%d input file(s) for %d workers: sharding run_fn datasets by record.",
        files,
        built.num_workers,
      )
      lib.shard_user_datasets_by_data(built.strategy)
  _LOG.info("Training with run_fn under %s (attempt %d).", built.choice.name, attempt)
  try:
    with built.strategy.scope():
      run_fn(fn_args)
  finally:
    if scratch:
      shutil.rmtree(scratch, ignore_errors=True)
  result = lib.TrainResult(
    strategy=built.choice.name,
    strategy_reason=built.choice.reason,
    num_replicas_in_sync=built.num_replicas_in_sync,
    task_type=built.task_type,
    task_index=built.task_index,
    is_chief=built.is_chief,
    module_style=constants.RUN_FN,
  )
  lib.write_result(fn_args.model_run_dir, result)
  return result


def _train_config(
  fn_args: DistributedFnArgs,
  exec_properties: dict[str, Any],
  output_dict: dict[str, list[types.Artifact]],
) -> lib.TrainConfig:
  """Maps FnArgs and execution properties to the plain TrainConfig of the library."""
  custom = dict(fn_args.custom_config or {})
  hparams = dict(custom.get(constants.HPARAMS_CONFIG) or {})
  if fn_args.hyperparameters:
    # Tuner output: keras_tuner.HyperParameters config; its 'values' are the chosen ones.
    hparams.update(fn_args.hyperparameters.get("values", {}))
  if not fn_args.schema_path:
    raise ValueError(
      "a build_model module needs the schema; pass schema=schema_gen.outputs['schema']"
    )
  return lib.TrainConfig(
    train_files=list(fn_args.train_files),
    eval_files=list(fn_args.eval_files),
    schema_path=fn_args.schema_path,
    model_dir=artifact_utils.get_single_uri(output_dict[standard_component_specs.MODEL_KEY]),
    model_run_dir=fn_args.model_run_dir,
    train_steps=fn_args.train_steps,
    eval_steps=fn_args.eval_steps,
    label_key=custom.get(constants.LABEL_KEY_CONFIG, lib.DEFAULT_LABEL_KEY),
    num_classes=custom.get(constants.NUM_CLASSES_CONFIG),
    global_batch_size=fn_args.global_batch_size,
    num_epochs=int(_prop(exec_properties, constants.NUM_EPOCHS_KEY, lib.DEFAULT_NUM_EPOCHS)),
    steps_per_execution=int(
      _prop(exec_properties, constants.STEPS_PER_EXECUTION_KEY, lib.DEFAULT_STEPS_PER_EXECUTION)
    ),
    mixed_precision=fn_args.mixed_precision,
    learning_rate=float(custom.get(constants.LEARNING_RATE_CONFIG, lib.DEFAULT_LEARNING_RATE)),
    hparams=hparams,
    base_model_dir=fn_args.base_model,
    seed=int(custom.get(constants.SEED_CONFIG, lib.DEFAULT_SHUFFLE_SEED)),
  )


def _record(model: types.Artifact, result: lib.TrainResult, num_workers: int, restarts: int):
  """Writes the strategy and the evaluation onto the Model artifact."""
  model.set_string_custom_property(constants.STRATEGY_PROPERTY, result.strategy)
  model.set_int_custom_property(constants.NUM_REPLICAS_PROPERTY, result.num_replicas_in_sync)
  model.set_string_custom_property(constants.STRATEGY_REASON_PROPERTY, result.strategy_reason)
  model.set_string_custom_property(constants.MODULE_STYLE_PROPERTY, result.module_style)
  model.set_int_custom_property(constants.NUM_WORKERS_PROPERTY, num_workers)
  model.set_int_custom_property(constants.RESTARTS_PROPERTY, restarts)
  if result.eval_accuracy is not None:
    model.set_float_custom_property(constants.EVAL_ACCURACY_PROPERTY, result.eval_accuracy)
  if result.initial_epoch is not None:
    model.set_int_custom_property(constants.INITIAL_EPOCH_PROPERTY, result.initial_epoch)
  if result.train_examples_per_sec is not None:
    model.set_float_custom_property(
      constants.EXAMPLES_PER_SEC_PROPERTY, result.train_examples_per_sec
    )
  _LOG.info(
    "DistributedTrainer result: strategy=%s replicas=%d reason=%s eval_accuracy=%s",
    result.strategy,
    result.num_replicas_in_sync,
    result.strategy_reason,
    result.eval_accuracy,
  )
