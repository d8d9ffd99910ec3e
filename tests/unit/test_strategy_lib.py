"""Table-driven tests of the DistributedTrainer strategy rules and their errors."""

import json

import pytest

from components.distributed_trainer import strategy_lib as sl
from core.defaults import (
  AUTO,
  MIRRORED,
  MULTI_WORKER_MIRRORED,
  ONE_DEVICE,
  PARAMETER_SERVER,
  STRATEGY_NAMES,
  TPU,
)


def _tf_config(workers=0, ps=0, chief=0, task=("worker", 0)):
  cluster = {}
  if workers:
    cluster["worker"] = [f"localhost:{1000 + i}" for i in range(workers)]
  if ps:
    cluster["ps"] = [f"localhost:{2000 + i}" for i in range(ps)]
  if chief:
    cluster["chief"] = ["localhost:3000"]
  return {"cluster": cluster, "task": {"type": task[0], "index": task[1]}}


# (requested, tf_config, num_gpus, tpu_available, expected strategy, words in the reason)
CHOICES = [
  ("auto", None, 0, False, ONE_DEVICE, "/cpu:0"),
  ("auto", None, 1, False, ONE_DEVICE, "/gpu:0"),
  ("auto", None, 2, False, MIRRORED, "2 GPUs"),
  ("auto", None, 8, True, TPU, "TPU"),
  ("auto", _tf_config(workers=2), 0, False, MULTI_WORKER_MIRRORED, "2 workers"),
  ("auto", _tf_config(workers=1, chief=1), 0, False, MULTI_WORKER_MIRRORED, "2 workers"),
  ("auto", _tf_config(workers=2), 4, True, MULTI_WORKER_MIRRORED, "2 workers"),
  ("auto", _tf_config(workers=2, ps=1, chief=1), 0, False, PARAMETER_SERVER, "1 ps task(s)"),
  ("auto", _tf_config(workers=2, ps=1, chief=1), 0, False, PARAMETER_SERVER, "and 2 worker"),
  ("auto", _tf_config(workers=1), 0, False, ONE_DEVICE, "OneDevice"),
  ("auto", json.dumps(_tf_config(workers=3)), 0, False, MULTI_WORKER_MIRRORED, "3 workers"),
  ("one_device", None, 2, False, ONE_DEVICE, "requested"),
  ("mirrored", None, 0, False, MIRRORED, "logical CPU"),
  ("mirrored", None, 4, False, MIRRORED, "4 GPUs"),
  ("multi_worker_mirrored", _tf_config(workers=1), 0, False, MULTI_WORKER_MIRRORED, "1 work"),
  ("multi_worker_mirrored", _tf_config(workers=2), 0, False, MULTI_WORKER_MIRRORED, "2 work"),
  ("parameter_server", _tf_config(workers=2, ps=2, chief=1), 0, False, PARAMETER_SERVER, "2 ps"),
  ("tpu", None, 0, True, TPU, "TPU"),
]


@pytest.mark.parametrize("case", CHOICES)
def test_choose_strategy_rules(case):
  requested, tf_config, gpus, tpu, expected, words = case
  choice = sl.choose_strategy(requested, tf_config, gpus, tpu)
  assert choice.name == expected
  assert words in choice.reason
  assert choice.reason.startswith("auto:" if requested == "auto" else "requested:")


# (requested, tf_config, num_gpus, tpu_available, words naming what is missing or the fix)
ERRORS = [
  ("tpu", None, 0, False, "needs a reachable TPU"),
  ("tpu", None, 4, False, "TPU_NAME"),
  ("multi_worker_mirrored", None, 0, False, "needs TF_CONFIG"),
  ("multi_worker_mirrored", None, 0, False, "local_workers"),
  ("multi_worker_mirrored", _tf_config(workers=2, ps=1, chief=1), 0, False, "ps task"),
  ("parameter_server", None, 0, False, "at least one 'ps' task"),
  ("parameter_server", _tf_config(workers=2), 0, False, "local_ps"),
  ("parameter_server", {"cluster": {"ps": ["a:1"]}, "task": {"type": "ps"}}, 0, False, "worker"),
  ("one_device", _tf_config(workers=2), 0, False, "cluster of 2 worker"),
  ("mirrored", _tf_config(workers=2), 2, False, "multi_worker_mirrored"),
  ("mirrored", _tf_config(workers=1, ps=1, chief=1), 2, False, "1 ps"),
  ("gpu", None, 1, False, "unknown strategy"),
  ("auto", "{not json", 0, False, "TF_CONFIG is not valid JSON"),
]


@pytest.mark.parametrize(("requested", "tf_config", "gpus", "tpu", "words"), ERRORS)
def test_choose_strategy_refuses_what_cannot_run(requested, tf_config, gpus, tpu, words):
  with pytest.raises(sl.StrategyUnavailableError, match=words):
    sl.choose_strategy(requested, tf_config, gpus, tpu)


def test_every_concrete_strategy_has_a_rule_and_a_builder():
  concrete = set(STRATEGY_NAMES) - {AUTO}
  assert {rule.name for rule in sl._RULES} == concrete
  assert set(sl._BUILDERS) == concrete
  assert sl._RULES[-1].auto_when(sl.ClusterEnv(0, 0, 0, False, 0, False))


ROLES = [
  (None, ("chief", 0), True, None),
  (_tf_config(workers=2, task=("worker", 0)), ("worker", 0), True, None),
  (_tf_config(workers=2, task=("worker", 1)), ("worker", 1), False, None),
  (_tf_config(workers=2, chief=1, task=("worker", 0)), ("worker", 0), False, None),
  (_tf_config(workers=2, chief=1, task=("chief", 0)), ("chief", 0), True, None),
  (_tf_config(workers=2, ps=1, chief=1, task=("chief", 0)), ("chief", 0), True, None),
  (_tf_config(workers=2, ps=1, chief=1, task=("worker", 1)), ("worker", 1), False, ("worker", 1)),
  (_tf_config(workers=2, ps=1, chief=1, task=("ps", 0)), ("ps", 0), False, ("ps", 0)),
]


@pytest.mark.parametrize(("tf_config", "task", "chief", "server"), ROLES)
def test_task_roles(tf_config, task, chief, server):
  assert sl.task_of(tf_config) == task
  assert sl.is_chief(tf_config) is chief
  assert sl.server_role(tf_config) == server


def test_detect_tpu_reads_tpu_name(monkeypatch):
  for var in ("TPU_NAME", "TPU_WORKER_HOSTNAMES", "COLAB_TPU_ADDR"):
    monkeypatch.delenv(var, raising=False)
  assert sl.detect_tpu() is False  # this machine has no TPU
  monkeypatch.setenv("TPU_NAME", "grpc://10.0.0.2:8470")
  assert sl.detect_tpu() is True


def test_build_strategy_one_device_and_mirrored_on_cpu(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  built = sl.build_strategy("auto", tpu_available=False)
  assert type(built.strategy).__name__ == "OneDeviceStrategy"
  assert built.num_replicas_in_sync == 1
  assert built.is_chief and built.cluster_coordinator is None
  mirrored = sl.build_strategy("mirrored")
  assert type(mirrored.strategy).__name__ == "MirroredStrategy"
  assert mirrored.choice.name == MIRRORED


def test_build_strategy_tpu_without_tpu_raises_before_touching_tf(monkeypatch):
  for var in ("TPU_NAME", "TPU_WORKER_HOSTNAMES", "COLAB_TPU_ADDR"):
    monkeypatch.delenv(var, raising=False)
  with pytest.raises(sl.StrategyUnavailableError, match="needs a reachable TPU"):
    sl.build_strategy("tpu")


def test_tpu_builder_follows_the_resolver_connect_initialize_sequence(monkeypatch):
  """The TPU path is real code: with TPU_NAME set it goes through TPUClusterResolver.

  There is no TPU here, so the resolver's connection attempt is what fails; the error must
  come from TensorFlow's TPU machinery (not from a missing branch in our code).
  """
  monkeypatch.setenv("TPU_NAME", "grpc://127.0.0.1:1")
  calls = []
  import tensorflow as tf

  real_resolver = tf.distribute.cluster_resolver.TPUClusterResolver

  def resolver(*args, **kwargs):
    calls.append(("resolver", kwargs.get("tpu", args[0] if args else None)))
    return real_resolver(*args, **kwargs)

  monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", resolver)
  monkeypatch.setattr(
    tf.config, "experimental_connect_to_cluster", lambda r: calls.append(("connect", r.master()))
  )

  def initialize(r):
    calls.append(("initialize", r.master()))
    raise RuntimeError("no TPU system at 127.0.0.1:1")

  monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", initialize)
  with pytest.raises(RuntimeError, match="no TPU system"):
    sl.build_strategy("tpu")
  assert calls == [
    ("resolver", "grpc://127.0.0.1:1"),
    ("connect", "grpc://127.0.0.1:1"),
    ("initialize", "grpc://127.0.0.1:1"),
  ]
