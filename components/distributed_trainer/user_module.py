"""The trainer module's side of training: its fn_args, its run_fn or build_model, its errors."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import inspect
import logging
import os
import re
import shutil
from typing import Any

import attr
from tfx.components.trainer import fn_args_utils
from tfx.components.util import udf_utils
from tfx.types import standard_component_specs

from components import model_contract
from components.distributed_trainer import strategy_lib, trainer_api
from components.distributed_trainer.trainer_api import is_marked, manages_strategy, plans_own_steps
from core import defaults
from core.errors import UserCodeError, UserInputError

_LOG = logging.getLogger(__name__)


@attr.s
class DistributedFnArgs(fn_args_utils.FnArgs):
  """Stock FnArgs plus the strategy built for this process.

  Attributes:
    strategy: the tf.distribute.Strategy (stock run_fns run inside its scope).
    cluster_coordinator: ClusterCoordinator under parameter_server, else None.
    strategy_name: chosen strategy name.
    strategy_reason: why it was chosen.
    is_chief: whether this process must export (non-chiefs get a scratch serving_model_dir).
    task_type: TF_CONFIG task type ('chief' without a cluster).
    task_index: TF_CONFIG task index.
    global_batch_size: examples per step over all replicas.
    num_epochs: epochs the training steps are split into (a backup is saved after each).
    steps_per_execution: steps per compiled call.
    mixed_precision: '', 'mixed_float16' or 'mixed_bfloat16'.
    built_strategy: the trainer_api.BuiltStrategy (for modules that manage the strategy).
    attempt: restart count of the surrounding local cluster.
    backup_dir: where BackupAndRestore keeps its checkpoint: keyed by the run's training
      fingerprint and outside the execution's own folders, so a rerun of a killed run with
      the same inputs resumes from it.
    build_model: the module's build_model(hparams) when it defines no run_fn, for the run_fn
      that trains it (`defaults.BUILD_MODEL_RUN_FN`); None otherwise.
  """

  strategy = attr.ib(type=Any, default=None)
  cluster_coordinator = attr.ib(type=Any, default=None)
  strategy_name = attr.ib(type=str, default=None)
  strategy_reason = attr.ib(type=str, default=None)
  is_chief = attr.ib(type=bool, default=True)
  task_type = attr.ib(type=str, default="chief")
  task_index = attr.ib(type=int, default=0)
  global_batch_size = attr.ib(type=int, default=defaults.GLOBAL_BATCH_SIZE)
  num_epochs = attr.ib(type=int, default=defaults.NUM_EPOCHS)
  steps_per_execution = attr.ib(type=int, default=defaults.STEPS_PER_EXECUTION)
  mixed_precision = attr.ib(type=str, default="")
  built_strategy = attr.ib(type=Any, default=None)
  attempt = attr.ib(type=int, default=0)
  backup_dir = attr.ib(type=str, default=None)
  build_model = attr.ib(type=Any, default=None)


def module_name(exec_properties: dict[str, Any]) -> str:
  """How messages name the module: its file, its module path or its run_fn's path."""
  return (
    exec_properties.get(standard_component_specs.MODULE_FILE_KEY)
    or exec_properties.get(standard_component_specs.MODULE_PATH_KEY)
    or exec_properties.get(standard_component_specs.RUN_FN_KEY)
    or "the trainer module"
  )


def trainer_module(exec_properties: dict[str, Any], module_style: str) -> str:
  """The module whose run_fn built the model, as the trainer loaded it (udf_utils' order).

  A build_model module's model is built by the run_fn at `defaults.BUILD_MODEL_RUN_FN`.
  """
  if module_style == defaults.BUILD_MODEL_FN:
    return defaults.BUILD_MODEL_RUN_FN.rpartition(".")[0]
  run_fn = exec_properties.get(standard_component_specs.RUN_FN_KEY) or ""
  return (
    exec_properties.get(standard_component_specs.MODULE_PATH_KEY)
    or exec_properties.get(standard_component_specs.MODULE_FILE_KEY)
    or run_fn.rpartition(".")[0]
  )


def is_own_module(exec_properties: dict[str, Any]) -> bool:
  """Whether the module is the one the component picks when given none (DEFAULT_MODULE_PATH).

  Nobody using the pipeline wrote that module, so its failures are the kit's own bugs: they
  keep their type instead of becoming a UserCodeError that points into the user's code.
  """
  return exec_properties.get(standard_component_specs.MODULE_PATH_KEY) == (
    defaults.DEFAULT_MODULE_PATH
  ) and not exec_properties.get(standard_component_specs.MODULE_FILE_KEY)


def run_module(
  fn_args: DistributedFnArgs, exec_properties: dict[str, Any]
) -> trainer_api.TrainResult:
  """Loads the module's run_fn, else its build_model, and trains with it in this process.

  A module with only `build_model(hparams)` is trained by the run_fn at
  `defaults.BUILD_MODEL_RUN_FN`, loaded by module path like any module's, which gets the
  function as `fn_args.build_model`.

  Args:
    fn_args: the stock FnArgs plus this process's strategy.
    exec_properties: execution properties (they name the module).

  Returns:
    This process's TrainResult.

  Raises:
    UserInputError: when the module defines neither run_fn nor build_model.
    UserCodeError: when the user's module code raises.
  """
  own = is_own_module(exec_properties)
  name = module_name(exec_properties)
  run_fn = udf_utils.try_get_fn(exec_properties, defaults.RUN_FN)
  if run_fn is not None:
    if not is_marked(run_fn, plans_own_steps) and not fn_args.train_steps:
      # A module of the stock contract gets a step count, as the stock Trainer's examples set
      # one; a module that plans its own steps (the default model) sizes training to the data.
      fn_args.train_steps = defaults.TRAIN_STEPS
      _LOG.info("No train steps given: fn_args.train_steps=%d.", defaults.TRAIN_STEPS)
    try:
      return _call_user_code(own, name, defaults.RUN_FN, _train_run_fn, run_fn, fn_args)
    except UserCodeError as e:
      source = _module_source(run_fn, name)
      _check_transform(fn_args, source, e)
      note = _keras3_note(source)
      if note:
        raise UserCodeError(e.module, e.function, e.__cause__, note) from e.__cause__
      raise
  fn_args.build_model = udf_utils.try_get_fn(exec_properties, defaults.BUILD_MODEL_FN)
  if fn_args.build_model is None:
    raise UserInputError(
      f"{name} defines neither run_fn(fn_args) nor build_model(hparams); add one of them."
    )
  trainer = udf_utils.get_fn(
    {standard_component_specs.RUN_FN_KEY: defaults.BUILD_MODEL_RUN_FN}, defaults.RUN_FN
  )
  return _call_user_code(own, name, defaults.BUILD_MODEL_FN, _train_run_fn, trainer, fn_args)


def _call_user_code(own: bool, module: str, function: str, call, *args):
  """Calls user module code; its own failures become UserCodeError naming module and function.

  User input errors keep their one-line form, and the project's own default module is not
  user code, so its errors stay what they are.
  """
  try:
    return call(*args)
  except (UserInputError, UserCodeError):
    raise
  except Exception as e:
    if own:
      raise
    raise UserCodeError(module, function, e) from e


def _module_source(function, name: str) -> tuple[str, str] | None:
  """(name, source text) of the module `function` was loaded from, or None if unreadable.

  The file is the one Python loaded: a packaged module's copy inside TFX's user-code wheel.
  """
  try:
    return name, inspect.getsource(inspect.getmodule(function))
  except (OSError, TypeError):  # No source: a compiled module, or one made in memory.
    return None


def _check_transform(fn_args, source: tuple[str, str] | None, error: UserCodeError) -> None:
  """Explains a run_fn failure that comes from reading `transform_output` without Transform."""
  if fn_args.transform_output or source is None:
    return
  module_file, text = source
  if "transform_output" in text or "transform_graph_path" in text:
    raise UserInputError(
      f"run_fn in {module_file} reads fn_args.transform_output, but the pipeline has no "
      "Transform; define preprocessing_fn in the module (or pass --transform-module FILE) so "
      "the pipeline adds one."
    ) from error


# `import keras`, `from keras import ...`, `from keras.x import ...`; not keras_tuner & co.
_IMPORTS_KERAS = re.compile(r"^\s*(import keras\b(?!_)|from keras(\.|\s+import\b))", re.M)


def _keras3_note(source: tuple[str, str] | None) -> str:
  """Why a module that imports `keras` itself may fail here, or "" when that cannot be it.

  With TF_USE_LEGACY_KERAS=1 (tensorflow-model-optimization needs Keras 2), `tf.keras` is
  tf_keras while `import keras` still gives Keras 3; their models, layers and callbacks do not
  mix (TFX's Airflow-workshop taxi module passes a Keras 3 LambdaCallback to a tf.keras fit).
  """
  if source is None or not _IMPORTS_KERAS.search(source[1]):
    return ""
  if os.environ.get("TF_USE_LEGACY_KERAS") != "1":
    return ""
  try:
    version = importlib.metadata.version("keras")
  except importlib.metadata.PackageNotFoundError:
    return ""
  if not version.startswith("3."):
    return ""
  return (
    f"The module imports `keras`, which is Keras {version} here, while tf.keras is Keras 2 "
    "(tf_keras: this pipeline sets TF_USE_LEGACY_KERAS=1 for tensorflow-model-optimization), "
    "and objects of the two do not mix; import from tensorflow.keras (or tf_keras) instead."
  )


def _train_run_fn(run_fn, fn_args: DistributedFnArgs) -> trainer_api.TrainResult:
  """Runs a run_fn: inside the strategy scope for stock ones; non-chiefs save to scratch."""
  from components import tf_compat

  built = fn_args.built_strategy
  if is_marked(run_fn, manages_strategy):
    run_fn(fn_args)
    return trainer_api.read_result(
      trainer_api.result_path(fn_args.model_run_dir, built.task_type, built.task_index)
    )
  scratch = None
  if not built.is_chief:
    # Stock modules save unconditionally, and a distributed save must run on every worker,
    # so non-chiefs save to a private folder that is removed afterwards.
    scratch = trainer_api.run_state_dir(
      fn_args.model_run_dir, "scratch", f"{built.task_type}-{built.task_index}"
    )
    fn_args.serving_model_dir = os.path.join(scratch, model_contract.SERVING_DIR)
  if built.choice.name == defaults.MULTI_WORKER_MIRRORED:
    files = min(
      len(trainer_api.list_files(fn_args.train_files)),
      len(trainer_api.list_files(fn_args.eval_files)),
    )
    if files < built.num_workers:
      _LOG.info(
        "%d input file(s) for %d workers: sharding run_fn datasets by record.",
        files,
        built.num_workers,
      )
      tf_compat.shard_by_record(built.strategy)
  _LOG.info("Training with run_fn under %s (attempt %d).", built.choice.name, fn_args.attempt)
  try:
    with tf_compat.yielding_scope(built.strategy) as scope:
      run_fn(fn_args)
  finally:
    if scratch:
      shutil.rmtree(scratch, ignore_errors=True)
  result = trainer_api.TrainResult.under(built, defaults.RUN_FN, trainer_strategy=built.choice.name)
  if scope.module_strategy is not None:
    result = _module_chose(result, scope.module_strategy, built)
  trainer_api.write_result(fn_args.model_run_dir, result)
  return result


def _module_chose(result: trainer_api.TrainResult, strategy, built) -> trainer_api.TrainResult:
  """The result of a run_fn that trained under a strategy it built and entered itself."""
  name = strategy_lib.strategy_name(strategy)
  replicas = int(strategy.num_replicas_in_sync)
  reason = (
    f"chosen by the module: run_fn built and entered its own {type(strategy).__name__} "
    f"({replicas} replica(s)), which replaced the trainer's {built.choice.name}"
  )
  if built.num_workers > 1 and name not in (
    defaults.MULTI_WORKER_MIRRORED,
    defaults.PARAMETER_SERVER,
  ):
    # Each worker of the cluster then trained on its own; the chief's model is the one kept.
    reason += f"; it spans one process, so the {built.num_workers} workers trained apart"
    _LOG.warning("%s.", reason)
  return dataclasses.replace(
    result,
    strategy=name,
    strategy_reason=reason,
    num_replicas_in_sync=replicas,
    strategy_chosen_by=trainer_api.CHOSEN_BY_MODULE,
  )
