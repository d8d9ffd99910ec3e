"""Table-driven tests of the DistributedTrainer strategy rules and their errors: which strategy a
request, a TF_CONFIG and the devices make, and each task's role (no strategy is built)."""

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
