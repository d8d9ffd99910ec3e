"""DistributedTrainer executor: TFX's GenericExecutor plus strategies and local clusters."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

import attr
from tfx import types
from tfx.components.trainer import executor as trainer_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs

import components
from components import model_contract
from components.distributed_trainer import (
  anomalies_lib,
  cluster_profiler,
  constants,
  launch,
  steps_lib,
  strategy_lib,
  tfjob_cluster,
  trainer_api,
  user_module,
)
from components.serving import layout as serving_layout
from core import defaults, properties
from core.errors import UserInputError

_LOG = logging.getLogger(__name__)


def _check_saved_model(serving_dir: str, module: str) -> None:
  """Refuses a training that left no TensorFlow SavedModel where the pipeline reads one."""
  how = (
    "model.save(fn_args.serving_model_dir, save_format='tf') or tf.saved_model.save(model, "
    "fn_args.serving_model_dir)"
  )
  if not fileio.exists(serving_dir):
    raise UserInputError(
      f"{module} finished without writing a model to fn_args.serving_model_dir; save it with {how}."
    )
  graph_files = serving_layout.SAVED_MODEL_FILES
  if not any(fileio.exists(os.path.join(serving_dir, f)) for f in graph_files):
    found = ", ".join(sorted(fileio.listdir(serving_dir))[:5]) or "nothing"
    raise UserInputError(
      f"{module} wrote {found} to fn_args.serving_model_dir but no TensorFlow SavedModel, which "
      f"the Evaluator, the Optimizer and TF Serving load; save the model with {how}."
    )


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
      UserInputError: when training left no SavedModel in fn_args.serving_model_dir.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    anomalies_lib.check_no_anomalies(input_dict.get(constants.ANOMALIES_KEY) or [])
    input_dict = _without_unavailable_base_model(input_dict)
    workers = int(_prop(exec_properties, constants.LOCAL_WORKERS_KEY, 0))
    num_ps = int(_prop(exec_properties, constants.LOCAL_PS_KEY, 0))
    restarts = 0
    tfjob = _prop(exec_properties, constants.TFJOB_KEY, "")
    if tfjob:
      result, restarts, workers = self._run_tfjob(input_dict, output_dict, exec_properties, tfjob)
    elif workers or num_ps:
      result, restarts = self._run_local_cluster(
        input_dict, output_dict, exec_properties, workers, num_ps
      )
    else:
      result = self.train(input_dict, output_dict, exec_properties)
    model = artifact_utils.get_single_instance(output_dict[standard_component_specs.MODEL_KEY])
    serving_dir = model_contract.serving_dir(model.uri)
    _check_saved_model(serving_dir, user_module.module_name(exec_properties))
    _record(model, result, num_workers=max(workers, 1), restarts=restarts)
    model.set_string_custom_property(
      properties.TRAINER_MODULE_PROPERTY,
      user_module.trainer_module(exec_properties, result.module_style),
    )
    examples = input_dict.get(standard_component_specs.EXAMPLES_KEY) or []
    data = model_contract.data_fingerprints(examples)
    model.set_string_custom_property(properties.DATA_FINGERPRINTS_PROPERTY, json.dumps(data))
    model.set_string_custom_property(
      properties.TRAINING_FINGERPRINT_PROPERTY, training_fingerprint(data, exec_properties)
    )
    _LOG.info("Training complete. Model written to %s.", serving_dir)

  def train(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
    attempt: int = 0,
  ) -> trainer_api.TrainResult:
    """Trains in this process under the strategy for its TF_CONFIG (also used by workers).

    Args:
      input_dict: resolved input artifacts.
      output_dict: output artifacts.
      exec_properties: execution properties.
      attempt: restart count of the surrounding local cluster.

    Returns:
      This process's TrainResult.

    Raises:
      UserInputError: when the module defines neither run_fn nor build_model.
      UserCodeError: when the user's module code raises.
    """
    from components import tf_compat

    tf_compat.apply()
    built = strategy_lib.build_strategy(
      _prop(exec_properties, constants.STRATEGY_KEY, defaults.AUTO)
    )
    global_batch_size = int(
      _prop(exec_properties, constants.GLOBAL_BATCH_SIZE_KEY, defaults.GLOBAL_BATCH_SIZE)
    )
    # Modules get positive step counts, as the stock Trainer's examples set them.
    exec_properties, eval_steps = steps_lib.with_eval_steps(
      exec_properties,
      input_dict.get(standard_component_specs.EXAMPLES_KEY) or [],
      global_batch_size,
    )
    if eval_steps:
      _LOG.info(
        "No eval steps given: fn_args.eval_steps=%d (one pass at %d).",
        eval_steps,
        global_batch_size,
      )
    fn_args = self._GetFnArgs(input_dict, output_dict, exec_properties)
    fn_args = user_module.DistributedFnArgs(
      **attr.asdict(fn_args, recurse=False),
      strategy=built.strategy,
      cluster_coordinator=built.cluster_coordinator,
      strategy_name=built.choice.name,
      strategy_reason=built.choice.reason,
      is_chief=built.is_chief,
      task_type=built.task_type,
      task_index=built.task_index,
      global_batch_size=global_batch_size,
      num_epochs=int(_prop(exec_properties, constants.NUM_EPOCHS_KEY, defaults.NUM_EPOCHS)),
      steps_per_execution=int(
        _prop(exec_properties, constants.STEPS_PER_EXECUTION_KEY, defaults.STEPS_PER_EXECUTION)
      ),
      mixed_precision=_prop(exec_properties, constants.MIXED_PRECISION_KEY, ""),
      built_strategy=built,
      attempt=attempt,
      backup_dir=backup_dir(input_dict, output_dict, exec_properties),
    )
    return user_module.run_module(fn_args, exec_properties)

  def _run_local_cluster(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
    workers: int,
    num_ps: int,
  ) -> tuple[trainer_api.TrainResult, int]:
    model_run_dir, spec_path = _write_spec(input_dict, output_dict, exec_properties)
    # The workers import this package by module path, so they need its parent on their path.
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(components.__file__)))
    python_path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    env = {"PYTHONPATH": python_path}
    if _profiles(exec_properties):
      # Every process serves its profile; the chief traces them all over the asked steps.
      tasks = [f"worker-{i}" for i in range(workers)] + [f"ps-{i}" for i in range(num_ps)]
      tasks += ["chief-0"] if num_ps else []
      env[cluster_profiler.PROFILER_PORTS_ENV] = json.dumps(
        dict(zip(tasks, launch.free_ports(len(tasks)), strict=True))
      )
    run = launch.run_local_cluster(
      _worker_command(sys.executable, spec_path),
      num_workers=workers,
      num_ps=num_ps,
      log_dir=trainer_api.run_state_dir(model_run_dir, "cluster_logs"),
      timeout_s=float(
        _prop(exec_properties, constants.WORKER_TIMEOUT_KEY, defaults.WORKER_TIMEOUT_S)
      ),
      max_restarts=int(_prop(exec_properties, constants.MAX_RESTARTS_KEY, defaults.MAX_RESTARTS)),
      env=env,
    )
    chief_type = "chief" if num_ps else "worker"
    result = trainer_api.read_result(trainer_api.result_path(model_run_dir, chief_type, 0))
    return result, run.restarts

  def _run_tfjob(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
    tfjob: str,
  ) -> tuple[trainer_api.TrainResult, int, int]:
    """Trains in a Kubeflow TFJob; returns the chief's result, the restarts and the workers.

    Every replica runs the worker entry point on a spec written under model_run (the
    pipeline root, which the replicas read); the job is recorded on the Model artifact.
    """
    from components.distributed_trainer import tfjob_lib, tfjob_manifest

    settings = tfjob_manifest.TFJobSettings.from_json(tfjob)
    model = artifact_utils.get_single_instance(output_dict[standard_component_specs.MODEL_KEY])
    model_run_dir, spec_path = _write_spec(input_dict, output_dict, exec_properties)
    env = {}
    if _profiles(exec_properties):
      # Each replica serves its profile on its TF_CONFIG port + 1; the chief traces them all.
      env[cluster_profiler.PROFILER_PORTS_ENV] = cluster_profiler.PROFILER_PORTS_FROM_TF_CONFIG
    timeout_s = int(_prop(exec_properties, constants.WORKER_TIMEOUT_KEY, defaults.WORKER_TIMEOUT_S))
    namespace = settings.namespace or tfjob_cluster.current_namespace()
    body = tfjob_manifest.build_tfjob(
      tfjob_manifest.job_name(model.uri),
      namespace,
      settings,
      _worker_command("python", spec_path),
      artifact_uri=model.uri,
      extra_env=env,
      active_deadline_s=timeout_s,
    )
    run = tfjob_lib.run_job(
      tfjob_cluster.connect(), body, timeout_s=timeout_s, poll_s=settings.poll_s
    )
    chief_type, chief_index = settings.chief()
    result = trainer_api.read_result(
      trainer_api.result_path(model_run_dir, chief_type, chief_index)
    )
    model.set_string_custom_property(properties.TFJOB_NAME_PROPERTY, run.name)
    model.set_string_custom_property(properties.TFJOB_NAMESPACE_PROPERTY, run.namespace)
    model.set_string_custom_property(
      properties.TFJOB_REPLICAS_PROPERTY,
      json.dumps({t.lower(): n for t, n in settings.replicas().items()}, sort_keys=True),
    )
    return result, run.logs.restarts, settings.workers


def _write_spec(input_dict, output_dict, exec_properties) -> tuple[str, str]:
  """Writes what every cluster process trains on; returns (model_run folder, spec path).

  The spec lives under model_run, which the worker processes (or TFJob replicas) can read.
  """
  model_run_dir = artifact_utils.get_single_uri(output_dict[standard_component_specs.MODEL_RUN_KEY])
  spec_path = trainer_api.run_state_dir(model_run_dir, "spec.json")
  fileio.makedirs(os.path.dirname(spec_path))
  with fileio.open(spec_path, "w") as f:
    f.write(
      json.dumps(
        {
          "input_dict": artifact_utils.jsonify_artifact_dict(input_dict),
          "output_dict": artifact_utils.jsonify_artifact_dict(output_dict),
          "exec_properties": exec_properties,
        }
      )
    )
  return model_run_dir, spec_path


def _worker_command(python: str, spec_path: str) -> list[str]:
  """The command line of one cluster process: the worker entry point on the spec."""
  return [python, "-m", "components.distributed_trainer.worker", "--spec", spec_path]


def _profiles(exec_properties: dict[str, Any]) -> bool:
  """Whether custom_config asks for a profile (then every cluster process serves one)."""
  custom = json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null")
  return bool((custom or {}).get(properties.PROFILE_STEPS_CONFIG))


def backup_dir(input_dict, output_dict, exec_properties) -> str:
  """`<node folder>/.backup/<training fingerprint>`: one checkpoint folder per training setup.

  The node folder is the parent of the execution's model_run folder (LocalDagRunner:
  `<pipeline_root>/DistributedTrainer`; Kubeflow: the run's task folder, so a retried pod of
  the same run resumes). BackupAndRestore deletes it when training completes.
  """
  model_run = artifact_utils.get_single_uri(output_dict[standard_component_specs.MODEL_RUN_KEY])
  data = model_contract.data_fingerprints(
    input_dict.get(standard_component_specs.EXAMPLES_KEY) or []
  )
  node = os.path.dirname(os.path.dirname(model_run.rstrip("/")))
  return os.path.join(node, ".backup", training_fingerprint(data, exec_properties)[:24])


def _without_unavailable_base_model(input_dict):
  """Drops a base model that LiveModel marked unavailable (nothing live to warm-start from)."""

  key = standard_component_specs.BASE_MODEL_KEY
  models = input_dict.get(key)
  if not models or all(properties.live_available(m) for m in models):
    return input_dict
  return {k: v for k, v in input_dict.items() if k != key}


# Execution properties that do not change what a run learns.
# Where a TFJob's replicas run (image, resources, namespace) is not what they learn.
_NOT_TRAINING_SETUP = (
  constants.WORKER_TIMEOUT_KEY,
  constants.MAX_RESTARTS_KEY,
  constants.TFJOB_KEY,
)


def training_fingerprint(data: list[str], exec_properties: dict[str, Any]) -> str:
  """A digest of what a training run learns from: its data, module and settings.

  Two runs with the same fingerprint learn the same thing; the Pusher pushes nothing when the
  live version has the candidate's fingerprint (a rerun without new data, on any orchestrator,
  cached or not). The base model is not part of it.
  """
  import hashlib

  module_file = exec_properties.get(standard_component_specs.MODULE_FILE_KEY)
  module = ""
  if module_file and fileio.exists(module_file):
    with fileio.open(module_file, "rb") as f:
      module = hashlib.sha256(f.read()).hexdigest()
  setup = {
    k: v
    for k, v in sorted(exec_properties.items())
    if k not in _NOT_TRAINING_SETUP and isinstance(v, str | int | float | bool | type(None))
  }
  text = json.dumps({"data": data, "module": module, "setup": setup}, sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()


def _record(
  model: types.Artifact, result: trainer_api.TrainResult, num_workers: int, restarts: int
):
  """Writes the strategy, the task and the evaluation onto the Model artifact."""
  model.set_string_custom_property(properties.STRATEGY_PROPERTY, result.strategy)
  model.set_int_custom_property(properties.NUM_REPLICAS_PROPERTY, result.num_replicas_in_sync)
  model.set_string_custom_property(properties.STRATEGY_REASON_PROPERTY, result.strategy_reason)
  model.set_string_custom_property(
    properties.STRATEGY_CHOSEN_BY_PROPERTY, result.strategy_chosen_by
  )
  model.set_string_custom_property(properties.MODULE_STYLE_PROPERTY, result.module_style)
  model.set_int_custom_property(properties.NUM_WORKERS_PROPERTY, num_workers)
  model.set_int_custom_property(properties.RESTARTS_PROPERTY, restarts)
  contract = model_contract.read_contract(model_contract.serving_dir(model.uri))
  if contract is not None:
    model.set_string_custom_property(properties.TASK_PROPERTY, contract.task)
    model.set_string_custom_property(
      properties.LABEL_CLASSES_PROPERTY, json.dumps(contract.label.get("classes", []))
    )
  elif result.task:
    model.set_string_custom_property(properties.TASK_PROPERTY, result.task)
  if result.hparams:
    model.set_string_custom_property(
      properties.HPARAMS_PROPERTY, json.dumps(result.hparams, sort_keys=True)
    )
  if result.eval_metrics:
    model.set_string_custom_property(
      properties.EVAL_METRICS_PROPERTY, json.dumps(result.eval_metrics, sort_keys=True)
    )
  if result.eval_accuracy is not None:
    model.set_float_custom_property(properties.EVAL_ACCURACY_PROPERTY, result.eval_accuracy)
  if result.initial_epoch is not None:
    model.set_int_custom_property(properties.INITIAL_EPOCH_PROPERTY, result.initial_epoch)
  if result.steps_run is not None:
    model.set_int_custom_property(properties.STEPS_RUN_PROPERTY, result.steps_run)
  if result.plan:
    plan = {**result.plan, "epochs_run": result.epochs_run, "best_epoch": result.best_epoch}
    model.set_string_custom_property(properties.TRAINING_PLAN_PROPERTY, json.dumps(plan))
  if result.train_examples_per_sec is not None:
    model.set_float_custom_property(
      properties.EXAMPLES_PER_SEC_PROPERTY, result.train_examples_per_sec
    )
  if result.profile_dir:
    model.set_string_custom_property(properties.PROFILE_DIR_PROPERTY, result.profile_dir)
  if result.profile_skipped:
    model.set_string_custom_property(properties.PROFILE_SKIPPED_PROPERTY, result.profile_skipped)
  _LOG.info(
    "DistributedTrainer result: strategy=%s replicas=%d reason=%s task=%s eval=%s",
    result.strategy,
    result.num_replicas_in_sync,
    result.strategy_reason,
    result.task,
    result.eval_metrics or result.eval_accuracy,
  )
