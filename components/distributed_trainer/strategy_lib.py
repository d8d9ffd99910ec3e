"""Chooses and builds the tf.distribute strategy for the DistributedTrainer from one rule table."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from components.distributed_trainer.trainer_api import BuiltStrategy, StrategyChoice
from core.defaults import (
  AUTO,
  MIRRORED,
  MULTI_WORKER_MIRRORED,
  ONE_DEVICE,
  PARAMETER_SERVER,
  STRATEGY_NAMES,
  TPU,
)
from core.errors import UserInputError

_LOG = logging.getLogger(__name__)

# TF_CONFIG job names that take part in training (the 'evaluator' job does not).
_TRAINING_JOBS = ("chief", "master", "worker")
# Environment variables that name a remote or local TPU for TPUClusterResolver.
_TPU_ENV_VARS = ("TPU_NAME", "TPU_WORKER_HOSTNAMES", "COLAB_TPU_ADDR")


class StrategyUnavailableError(UserInputError):
  """A requested strategy cannot run here; the message names what is missing."""


@dataclasses.dataclass(frozen=True)
class ClusterEnv:
  """What the rules look at: the cluster from TF_CONFIG and the local accelerators."""

  num_workers: int  # chief + worker tasks in TF_CONFIG; 0 without a cluster.
  num_ps: int
  num_worker_tasks: int  # tasks of the 'worker' job only (PS clusters add a chief).
  has_tf_config: bool
  num_gpus: int
  tpu_available: bool

  @classmethod
  def from_inputs(
    cls, tf_config: Mapping[str, Any] | str | None, num_gpus: int, tpu_available: bool
  ) -> ClusterEnv:
    """Builds the rule input from a TF_CONFIG (dict, JSON string or None) and device counts."""
    config = parse_tf_config(tf_config)
    cluster = config.get("cluster") or {}
    return cls(
      num_workers=sum(len(cluster.get(job) or ()) for job in _TRAINING_JOBS),
      num_ps=len(cluster.get("ps") or ()),
      num_worker_tasks=len(cluster.get("worker") or ()),
      has_tf_config=bool(cluster),
      num_gpus=int(num_gpus),
      tpu_available=bool(tpu_available),
    )


@dataclasses.dataclass(frozen=True)
class _Rule:
  """One row of the rule table.

  `auto_when` decides whether `auto` picks this strategy (rows are tried in order);
  `missing` returns what an explicit request lacks, or None when it can run.
  """

  name: str
  auto_when: Callable[[ClusterEnv], bool]
  reason: Callable[[ClusterEnv], str]
  missing: Callable[[ClusterEnv], str | None]


def _missing_for_single_process(name: str) -> Callable[[ClusterEnv], str | None]:
  def check(env: ClusterEnv) -> str | None:
    if env.num_workers > 1 or env.num_ps:
      return (
        f"strategy '{name}' trains in one process but TF_CONFIG describes a cluster of "
        f"{env.num_workers} worker(s) and {env.num_ps} ps task(s); use "
        f"'{MULTI_WORKER_MIRRORED}' or '{PARAMETER_SERVER}' (or 'auto'), or unset TF_CONFIG"
      )
    return None

  return check


def _missing_for_multi_worker(env: ClusterEnv) -> str | None:
  if not env.has_tf_config or env.num_workers == 0:
    return (
      f"strategy '{MULTI_WORKER_MIRRORED}' needs TF_CONFIG with worker tasks; set local_workers=N "
      "to launch N local workers, or run under a launcher (TFJob, Vertex) that sets TF_CONFIG"
    )
  if env.num_ps:
    return (
      f"strategy '{MULTI_WORKER_MIRRORED}' cannot use the {env.num_ps} ps task(s) in TF_CONFIG; "
      f"request '{PARAMETER_SERVER}' or remove the ps tasks"
    )
  return None


def _missing_for_parameter_server(env: ClusterEnv) -> str | None:
  if not env.has_tf_config or env.num_ps == 0:
    return (
      f"strategy '{PARAMETER_SERVER}' needs TF_CONFIG with at least one 'ps' task; set "
      "local_ps=M and local_workers=N to launch them locally, or run under a launcher that sets "
      "TF_CONFIG"
    )
  if env.num_worker_tasks == 0:
    return f"strategy '{PARAMETER_SERVER}' needs at least one 'worker' task in TF_CONFIG"
  return None


def _missing_for_tpu(env: ClusterEnv) -> str | None:
  if not env.tpu_available:
    return (
      f"strategy '{TPU}' needs a reachable TPU but none was found (no local TPU device and none "
      f"of {', '.join(_TPU_ENV_VARS)} set); run on a TPU VM or set TPU_NAME, or choose another "
      "strategy"
    )
  return None


# The single rule table. Order matters for `auto`: cluster shape first (it is an explicit
# deployment decision), then accelerators, then the always-available fallback.
_RULES: tuple[_Rule, ...] = (
  _Rule(
    name=PARAMETER_SERVER,
    auto_when=lambda env: env.num_ps > 0,
    reason=lambda env: (
      f"TF_CONFIG has {env.num_ps} ps task(s) and {env.num_worker_tasks} worker(s): "
      "ParameterServerStrategy with a ClusterCoordinator"
    ),
    missing=_missing_for_parameter_server,
  ),
  _Rule(
    name=MULTI_WORKER_MIRRORED,
    auto_when=lambda env: env.num_workers > 1,
    reason=lambda env: (
      f"TF_CONFIG has {env.num_workers} workers: synchronous MultiWorkerMirroredStrategy"
    ),
    missing=_missing_for_multi_worker,
  ),
  _Rule(
    name=TPU,
    auto_when=lambda env: env.tpu_available,
    reason=lambda env: "a TPU is reachable: TPUStrategy",
    missing=_missing_for_tpu,
  ),
  _Rule(
    name=MIRRORED,
    auto_when=lambda env: env.num_gpus > 1,
    reason=lambda env: (
      f"{env.num_gpus} GPUs visible: MirroredStrategy over them"
      if env.num_gpus > 1
      else "MirroredStrategy over the visible devices (one replica per GPU, else per logical "
      "CPU device)"
    ),
    missing=_missing_for_single_process(MIRRORED),
  ),
  _Rule(
    name=ONE_DEVICE,
    auto_when=lambda env: True,
    reason=lambda env: (
      f"no cluster, no TPU and {env.num_gpus} GPU(s): OneDeviceStrategy on "
      f"{'/gpu:0' if env.num_gpus else '/cpu:0'}"
    ),
    missing=_missing_for_single_process(ONE_DEVICE),
  ),
)
_RULES_BY_NAME = {rule.name: rule for rule in _RULES}


def parse_tf_config(tf_config: Mapping[str, Any] | str | None) -> dict[str, Any]:
  """Returns TF_CONFIG as a dict.

  Args:
    tf_config: a dict, a JSON string, or None/"" for no cluster.

  Returns:
    The parsed dict ({} without a cluster).

  Raises:
    StrategyUnavailableError: if the string is not valid JSON.
  """
  if not tf_config:
    return {}
  if isinstance(tf_config, str):
    try:
      return json.loads(tf_config)
    except json.JSONDecodeError as e:
      raise StrategyUnavailableError(
        f"TF_CONFIG is not valid JSON ({e}); fix or unset the TF_CONFIG environment variable"
      ) from e
  return dict(tf_config)


def choose_strategy(
  requested: str,
  tf_config: Mapping[str, Any] | str | None,
  num_gpus: int,
  tpu_available: bool,
) -> StrategyChoice:
  """Picks the strategy for this process from the rule table (pure; no TensorFlow).

  `auto` takes the first rule whose condition holds. An explicit request is honoured or
  refused; it never silently falls back to another strategy. `mirrored` is legal with a
  single device (it then runs one replica), so that the same pipeline runs on a laptop and
  on a multi-GPU host.

  Args:
    requested: one of STRATEGY_NAMES.
    tf_config: the TF_CONFIG of this process (dict, JSON string or None).
    num_gpus: number of visible GPUs.
    tpu_available: whether a TPU is reachable (see `detect_tpu`).

  Returns:
    The StrategyChoice with a one-sentence reason.

  Raises:
    StrategyUnavailableError: the name is unknown or the requested strategy cannot run here.
  """
  env = ClusterEnv.from_inputs(tf_config, num_gpus, tpu_available)
  if requested == AUTO:
    for rule in _RULES:
      if rule.auto_when(env):
        return StrategyChoice(rule.name, f"auto: {rule.reason(env)}")
    raise AssertionError("the last rule always applies")  # The table ends with a catch-all.
  rule = _RULES_BY_NAME.get(requested)
  if rule is None:
    raise StrategyUnavailableError(
      f"unknown strategy {requested!r}; use one of {', '.join(STRATEGY_NAMES)}"
    )
  problem = rule.missing(env)
  if problem:
    raise StrategyUnavailableError(problem)
  return StrategyChoice(rule.name, f"requested: {rule.reason(env)}")


def tf_config_from_env() -> dict[str, Any]:
  """Returns the TF_CONFIG of this process as a dict ({} when unset)."""
  return parse_tf_config(os.environ.get("TF_CONFIG"))


def task_of(tf_config: Mapping[str, Any] | str | None) -> tuple[str, int]:
  """Returns (task_type, task_index) of this process; ('chief', 0) without a cluster."""
  config = parse_tf_config(tf_config)
  task = config.get("task") or {}
  if not config.get("cluster") or not task:
    return "chief", 0
  return str(task.get("type", "worker")), int(task.get("index", 0))


def is_chief(tf_config: Mapping[str, Any] | str | None) -> bool:
  """Whether this process exports: the chief, or worker 0 of a cluster without a chief.

  Without a cluster the process is the chief (`task_of`).
  """
  config = parse_tf_config(tf_config)
  cluster = config.get("cluster") or {}
  task_type, task_index = task_of(config)
  if task_type in ("chief", "master"):
    return task_index == 0
  return task_type == "worker" and task_index == 0 and not cluster.get("chief")


def server_role(tf_config: Mapping[str, Any] | str | None) -> tuple[str, int] | None:
  """Returns (job, index) if this process only hosts a tf.distribute.Server, else None.

  In a parameter-server cluster the 'ps' and 'worker' tasks run servers and the chief
  (coordinator) runs the user code.
  """
  config = parse_tf_config(tf_config)
  cluster = config.get("cluster") or {}
  task_type, task_index = task_of(config)
  if task_type == "ps" or (task_type == "worker" and cluster.get("ps")):
    return task_type, task_index
  return None


def detect_tpu() -> bool:
  """Whether a TPU is reachable without network probes.

  A TPU counts as reachable when this host has local TPU devices (TPU VM with libtpu) or
  one of TPU_NAME / TPU_WORKER_HOSTNAMES / COLAB_TPU_ADDR names one. We do not ask the GCE
  metadata server, because off Google Cloud that lookup hangs until it times out.
  """
  if any(os.environ.get(var) for var in _TPU_ENV_VARS):
    return True
  import tensorflow as tf

  return bool(tf.config.list_physical_devices("TPU"))


def count_gpus() -> int:
  """Returns the number of GPUs TensorFlow can see."""
  import tensorflow as tf

  return len(tf.config.list_physical_devices("GPU"))


def _tpu_address() -> str:
  for var in _TPU_ENV_VARS:
    if os.environ.get(var):
      return os.environ[var] if var == "TPU_NAME" else ""
  return "local"


def _build_tpu():
  import tensorflow as tf

  resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=_tpu_address())
  # Remote TPUs (TPU Node) need the client to join the TPU cluster; on a TPU VM
  # ('local') connecting is a no-op that TF rejects, so skip it there.
  if resolver.master():
    tf.config.experimental_connect_to_cluster(resolver)
  tf.tpu.experimental.initialize_tpu_system(resolver)
  return tf.distribute.TPUStrategy(resolver)


def _build_mirrored():
  import tensorflow as tf

  gpus = tf.config.list_logical_devices("GPU")
  devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
  return tf.distribute.MirroredStrategy(devices=devices)


def _build_multi_worker():
  import tensorflow as tf

  return tf.distribute.MultiWorkerMirroredStrategy(
    cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver()
  )


def _build_parameter_server():
  import tensorflow as tf

  return tf.distribute.ParameterServerStrategy(
    tf.distribute.cluster_resolver.TFConfigClusterResolver()
  )


def _build_one_device():
  import tensorflow as tf

  device = "/gpu:0" if tf.config.list_logical_devices("GPU") else "/cpu:0"
  return tf.distribute.OneDeviceStrategy(device)


_BUILDERS: dict[str, Callable[[], Any]] = {
  ONE_DEVICE: _build_one_device,
  MIRRORED: _build_mirrored,
  MULTI_WORKER_MIRRORED: _build_multi_worker,
  PARAMETER_SERVER: _build_parameter_server,
  TPU: _build_tpu,
}


def build_strategy(
  requested: str,
  tf_config: Mapping[str, Any] | str | None = None,
  num_gpus: int | None = None,
  tpu_available: bool | None = None,
) -> BuiltStrategy:
  """Chooses (see `choose_strategy`) and constructs the strategy for this process.

  The TF_CONFIG used for the choice must be the one in the environment, because the
  cluster resolvers read it from there; pass None to read it.

  Args:
    requested: one of STRATEGY_NAMES.
    tf_config: TF_CONFIG override for the choice; None reads the environment.
    num_gpus: GPU count override; None asks TensorFlow.
    tpu_available: TPU override; None runs `detect_tpu`.

  Returns:
    The BuiltStrategy (with a ClusterCoordinator for parameter_server).

  Raises:
    StrategyUnavailableError: when the requested strategy cannot run here.
  """
  config = tf_config_from_env() if tf_config is None else parse_tf_config(tf_config)
  gpus = count_gpus() if num_gpus is None else num_gpus
  if tpu_available is None:
    # Only probe for a TPU when it can matter: probing initialises the TF runtime.
    tpu_available = detect_tpu() if requested in (AUTO, TPU) else False
  choice = choose_strategy(requested, config, gpus, tpu_available)
  strategy = _BUILDERS[choice.name]()
  coordinator = None
  if choice.name == PARAMETER_SERVER:
    import tensorflow as tf

    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
  task_type, task_index = task_of(config)
  built = BuiltStrategy(
    strategy=strategy,
    choice=choice,
    cluster_coordinator=coordinator,
    is_chief=is_chief(config),
    task_type=task_type,
    task_index=task_index,
    num_workers=max(1, ClusterEnv.from_inputs(config, gpus, tpu_available).num_workers),
  )
  _LOG.info(
    "DistributedTrainer strategy=%s num_replicas_in_sync=%d task=%s:%d reason=%s",
    choice.name,
    built.num_replicas_in_sync,
    task_type,
    task_index,
    choice.reason,
  )
  return built


# The kit's name for each public strategy class, for strategies a module builds itself.
_CLASS_NAMES = (
  ("TPUStrategy", TPU),
  ("MultiWorkerMirroredStrategy", MULTI_WORKER_MIRRORED),
  ("ParameterServerStrategy", PARAMETER_SERVER),
  ("MirroredStrategy", MIRRORED),
  ("OneDeviceStrategy", ONE_DEVICE),
)


def strategy_name(strategy) -> str:
  """The kit's name of a tf.distribute strategy (one of STRATEGY_NAMES but 'auto').

  A class the kit has no name for keeps its class name, e.g. 'CentralStorageStrategy'.
  """
  import tensorflow as tf

  for class_name, name in _CLASS_NAMES:
    # The most specific first (TPUStrategy); MultiWorkerMirrored and Mirrored are unrelated.
    cls = getattr(tf.distribute, class_name, None) or getattr(
      tf.distribute.experimental, class_name, None
    )
    if cls is not None and isinstance(strategy, cls):
      return name
  return type(strategy).__name__
