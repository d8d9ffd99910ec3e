"""The hooks any trainer module may use, and how the trainer and the Tuner read them."""

import textwrap

import pytest
from tfx.proto import trainer_pb2
from tfx.types import standard_component_specs as sc
from tfx.utils import proto_utils

from components.distributed_trainer import tuner, user_module
from components.distributed_trainer.trainer_api import (
  is_marked,
  manages_strategy,
  plans_own_steps,
)
from core import defaults

MARKED_TUNER = textwrap.dedent("""
  from components.distributed_trainer.trainer_api import plans_own_steps

  @plans_own_steps
  def tuner_fn(fn_args):
    return None
""")
STOCK_TUNER = "def tuner_fn(fn_args):\n  return None\n"


def test_marks_are_read_by_name_and_default_to_unmarked():
  @manages_strategy
  @plans_own_steps
  def marked(fn_args):
    return fn_args

  def stock(fn_args):
    return fn_args

  assert is_marked(marked, manages_strategy) and is_marked(marked, plans_own_steps)
  assert not is_marked(stock, manages_strategy) and not is_marked(stock, plans_own_steps)


def _train_steps(properties) -> int:
  train_args = trainer_pb2.TrainArgs()
  if properties.get(sc.TRAIN_ARGS_KEY):
    proto_utils.json_to_proto(properties[sc.TRAIN_ARGS_KEY], train_args)
  return train_args.num_steps


@pytest.mark.parametrize(
  ("source", "steps"),
  [(None, 0), (MARKED_TUNER, 0), (STOCK_TUNER, defaults.TRAIN_STEPS)],
  ids=["default-model", "marked-copy", "stock"],
)
def test_the_tuner_gives_a_step_count_only_to_a_tuner_fn_that_plans_none(tmp_path, source, steps):
  eval_args = proto_utils.proto_to_json(trainer_pb2.EvalArgs(num_steps=5))
  properties = {sc.EVAL_ARGS_KEY: eval_args}
  if source is None:
    properties[sc.TUNER_FN_KEY] = f"{defaults.DEFAULT_MODULE_PATH}.{defaults.TUNER_FN}"
  else:
    (tmp_path / "module.py").write_text(source)
    properties[sc.MODULE_FILE_KEY] = str(tmp_path / "module.py")
  assert _train_steps(tuner.tuner_properties(properties, [])) == steps


def test_the_model_records_the_module_that_built_it():
  by_path = {sc.MODULE_PATH_KEY: defaults.DEFAULT_MODULE_PATH}
  assert user_module.trainer_module(by_path, "tabular") == defaults.DEFAULT_MODULE_PATH
  packaged = {sc.MODULE_PATH_KEY: "m@/root/_wheels/m.whl", sc.MODULE_FILE_KEY: "/src/m.py"}
  assert user_module.trainer_module(packaged, defaults.RUN_FN) == "m@/root/_wheels/m.whl"
  assert user_module.trainer_module({sc.MODULE_FILE_KEY: "/src/m.py"}, "run_fn") == "/src/m.py"
  assert user_module.trainer_module({sc.RUN_FN_KEY: "pkg.mod.run_fn"}, "run_fn") == "pkg.mod"
  # A build_model module's model is built by the run_fn the trainer loads for it.
  assert (
    user_module.trainer_module({sc.MODULE_FILE_KEY: "/src/m.py"}, "build_model")
    == (defaults.BUILD_MODEL_RUN_FN.rpartition(".")[0])
  )
