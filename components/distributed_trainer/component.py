"""DistributedTrainer: the stock TFX Trainer contract plus tf.distribute strategies."""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx.components.util import udf_utils
from tfx.dsl.components.base import base_component, executor_spec
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import json_utils

from components.distributed_trainer import distributed_trainer_lib as lib
from components.distributed_trainer import executor, trainer_api
from components.distributed_trainer.spec import DistributedTrainerSpec
from core import defaults

_CLUSTER_STRATEGIES = (
  defaults.AUTO,
  defaults.MULTI_WORKER_MIRRORED,
  defaults.PARAMETER_SERVER,
)


def _check_arguments(
  module_file: str | None,
  run_fn: str | None,
  strategy: str,
  local_workers: int,
  local_ps: int,
  global_batch_size: int,
  mixed_precision: str,
  tfjob: str,
) -> None:
  """Refuses argument combinations that cannot work; the message says what to pass."""
  if module_file and run_fn:
    raise lib.TrainerInputError("pass module_file or run_fn, not both")
  if strategy not in defaults.STRATEGY_NAMES:
    raise lib.TrainerInputError(
      f"strategy={strategy!r} is unknown; pass one of {', '.join(defaults.STRATEGY_NAMES)}"
    )
  if local_workers < 0 or local_ps < 0:
    raise lib.TrainerInputError("local_workers and local_ps must be >= 0")
  processes = defaults.local_cluster_processes(local_workers, local_ps)
  if processes > defaults.max_local_processes():
    raise lib.TrainerInputError(
      f"local_workers={local_workers} and local_ps={local_ps} would start "
      f"{processes} processes on this machine, over its "
      f"{defaults.max_local_processes()}; train across machines with a TFJob instead"
    )
  if local_ps and not local_workers:
    raise lib.TrainerInputError(
      f"local_ps={local_ps} needs workers to serve; pass local_workers >= 1 too"
    )
  if (local_workers or local_ps) and strategy not in _CLUSTER_STRATEGIES:
    raise lib.TrainerInputError(
      f"local_workers/local_ps launch a cluster, which strategy={strategy!r} cannot use; pass "
      f"strategy='auto', 'multi_worker_mirrored' or 'parameter_server', or local_workers=0"
    )
  if local_ps and strategy == defaults.MULTI_WORKER_MIRRORED:
    raise lib.TrainerInputError(
      "multi_worker_mirrored has no parameter servers; pass local_ps=0 or "
      "strategy='parameter_server'"
    )
  if local_workers and not local_ps and strategy == defaults.PARAMETER_SERVER:
    raise lib.TrainerInputError(
      "strategy='parameter_server' with local_workers needs local_ps >= 1"
    )
  if global_batch_size < 1:
    raise lib.TrainerInputError(f"global_batch_size must be >= 1, got {global_batch_size}")
  if mixed_precision not in trainer_api.MIXED_PRECISION_POLICIES:
    raise lib.TrainerInputError(
      f"mixed_precision={mixed_precision!r}; pass one of 'mixed_float16', 'mixed_bfloat16' or ''"
    )
  if tfjob and (local_workers or local_ps):
    raise lib.TrainerInputError(
      "tfjob runs the replicas on Kubernetes; pass local_workers=0, local_ps=0"
    )


class DistributedTrainer(base_component.BaseComponent):
  """Trains a `run_fn` or `build_model` module under a tf.distribute strategy.

  Outputs are the stock Trainer's: `model` (Model; Format-Serving, plus Format-Keras for
  build_model modules) and `model_run` (ModelRun; TensorBoard logs, backups, cluster logs).

  Args:
    examples: Examples channel with `train` and `eval` splits (or those in the args).
    schema: Schema channel; required by build_model modules.
    module_file: path of a module defining `run_fn(fn_args)` (stock Trainer style; it gets
      `fn_args.strategy` too) or `build_model(hparams)` (the network of the default model,
      which `defaults.BUILD_MODEL_RUN_FN` trains around it: preprocessing, input, fit,
      evaluation and export). Without module_file and run_fn the trainer loads the module at
      `defaults.DEFAULT_MODULE_PATH`, `models.tabular.module` (a tabular model for any CSV).
    train_args: TrainArgs; num_steps is the total step count.
    eval_args: EvalArgs; num_steps limits eval batches (0: the whole split).
    strategy: auto|one_device|mirrored|multi_worker_mirrored|parameter_server|tpu.
    local_workers: > 0 launches that many local worker processes on loopback.
    local_ps: parameter-server processes for a local parameter_server cluster.
    custom_config: JSON-serialisable dict; the default model (and so build_model modules)
      reads label_key, task, exclude_columns, hparams, profile_steps and seed from it.
    base_model: optional Model channel to warm-start from.
    anomalies: optional ExampleValidator output; if it found anomalies in the
      examples, training stops with a message naming them.
    run_fn: python path of a run_fn instead of module_file.
    transform_graph: optional TransformGraph channel (passed through to run_fn).
    hyperparameters: optional HyperParameters channel (merged into hparams).
    global_batch_size: examples per step over all replicas (build_model path).
    num_epochs: epochs the steps are split into; BackupAndRestore saves after each.
    steps_per_execution: steps per compiled call when the trainer compiles.
    mixed_precision: '', 'mixed_float16' or 'mixed_bfloat16'.
    worker_timeout_s: wall-clock limit of a local cluster run.
    max_restarts: local cluster restarts after a failed process.
    tfjob: `tfjob_manifest.TFJobSettings` JSON: the step runs its replicas as a Kubeflow TFJob
      (run_kubeflow.py --workers); '' trains here or in the local cluster.
  """

  SPEC_CLASS = DistributedTrainerSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(
    self,
    examples: types.BaseChannel,
    schema: types.BaseChannel | None = None,
    module_file: str | None = None,
    train_args: trainer_pb2.TrainArgs | None = None,
    eval_args: trainer_pb2.EvalArgs | None = None,
    *,
    strategy: str = defaults.AUTO,
    local_workers: int = 0,
    local_ps: int = 0,
    custom_config: dict[str, Any] | None = None,
    base_model: types.BaseChannel | None = None,
    anomalies: types.BaseChannel | None = None,
    run_fn: str | None = None,
    transform_graph: types.BaseChannel | None = None,
    hyperparameters: types.BaseChannel | None = None,
    global_batch_size: int = defaults.GLOBAL_BATCH_SIZE,
    num_epochs: int = defaults.NUM_EPOCHS,
    steps_per_execution: int = defaults.STEPS_PER_EXECUTION,
    mixed_precision: str = "",
    worker_timeout_s: int = defaults.WORKER_TIMEOUT_S,
    max_restarts: int = defaults.MAX_RESTARTS,
    tfjob: str = "",
  ):
    """Wires a DistributedTrainer (its arguments are described on the class).

    Raises:
      TrainerInputError: for argument combinations that cannot work; the message says what to
        pass.
    """
    _check_arguments(
      module_file,
      run_fn,
      strategy,
      local_workers,
      local_ps,
      global_batch_size,
      mixed_precision,
      tfjob,
    )
    # The default model ships with the kit (models/), so it is imported by module path and
    # needs no wheel packaging on Kubeflow.
    module_path = None if (module_file or run_fn) else defaults.DEFAULT_MODULE_PATH
    spec = DistributedTrainerSpec(
      examples=examples,
      transform_graph=transform_graph,
      schema=schema,
      base_model=base_model,
      anomalies=anomalies,
      hyperparameters=hyperparameters,
      train_args=train_args or trainer_pb2.TrainArgs(),
      eval_args=eval_args or trainer_pb2.EvalArgs(),
      module_file=module_file,
      module_path=module_path,
      run_fn=run_fn,
      custom_config=json_utils.dumps(custom_config),
      strategy=strategy,
      local_workers=local_workers,
      local_ps=local_ps,
      global_batch_size=global_batch_size,
      num_epochs=num_epochs,
      steps_per_execution=steps_per_execution,
      mixed_precision=mixed_precision,
      worker_timeout_s=worker_timeout_s,
      max_restarts=max_restarts,
      tfjob=tfjob or None,
      model=types.Channel(type=standard_artifacts.Model),
      model_run=types.Channel(type=standard_artifacts.ModelRun),
    )
    super().__init__(spec=spec)
    if module_file and udf_utils.should_package_user_modules():
      # As the stock Trainer: the module file becomes a wheel in the pipeline root and the
      # executor (and every worker process) imports it through `module_path`.
      udf_utils.add_user_module_dependency(
        self, standard_component_specs.MODULE_FILE_KEY, standard_component_specs.MODULE_PATH_KEY
      )
