"""Construction and wiring tests of the DistributedTrainer component."""

import json

import pytest
from tfx.proto import trainer_pb2
from tfx.types import channel_utils, standard_artifacts
from tfx.types import standard_component_specs as sc

from components.distributed_trainer import DistributedTrainer, constants, executor
from components.distributed_trainer import distributed_trainer_lib as lib
from core import defaults


def _channels():
  examples = channel_utils.as_channel([standard_artifacts.Examples()])
  schema = channel_utils.as_channel([standard_artifacts.Schema()])
  return examples, schema


def _trainer(**kwargs):
  examples, schema = _channels()
  args = dict(
    examples=examples,
    schema=schema,
    module_file="/abs/path/module.py",
    train_args=trainer_pb2.TrainArgs(num_steps=100),
    eval_args=trainer_pb2.EvalArgs(num_steps=5),
  )
  args.update(kwargs)
  return DistributedTrainer(**args)


def test_construct_with_the_pipeline_call(monkeypatch):
  monkeypatch.setenv("UNSUPPORTED_DO_NOT_PACKAGE_USER_MODULES", "1")
  examples, schema = _channels()
  base = channel_utils.as_channel([standard_artifacts.Model()])
  trainer = DistributedTrainer(
    examples=examples,
    schema=schema,
    module_file="/abs/path/module.py",
    train_args=trainer_pb2.TrainArgs(num_steps=100),
    eval_args=trainer_pb2.EvalArgs(num_steps=5),
    strategy="auto",
    local_workers=2,
    local_ps=0,
    custom_config={"label_key": "label", "hparams": {"hidden_units": 32}},
    base_model=base,
  )
  assert set(trainer.outputs) == {sc.MODEL_KEY, sc.MODEL_RUN_KEY}
  assert trainer.outputs["model"].type == standard_artifacts.Model
  assert trainer.outputs["model_run"].type == standard_artifacts.ModelRun
  assert trainer.inputs[sc.BASE_MODEL_KEY] is base
  props = trainer.exec_properties
  assert props[constants.STRATEGY_KEY] == "auto"
  assert props[constants.LOCAL_WORKERS_KEY] == 2
  assert props[constants.LOCAL_PS_KEY] == 0
  assert props[sc.MODULE_FILE_KEY] == "/abs/path/module.py"
  assert json.loads(props[sc.CUSTOM_CONFIG_KEY])["hparams"] == {"hidden_units": 32}
  assert json.loads(props[sc.TRAIN_ARGS_KEY])["num_steps"] == 100
  # The executor is importable by module path (works on Kubeflow, never __main__).
  executor_class = trainer.executor_spec.executor_class
  assert executor_class is executor.Executor
  assert executor_class.__module__ == "components.distributed_trainer.executor"


def test_spec_extends_stock_trainer_spec():
  spec = DistributedTrainer.SPEC_CLASS
  assert set(sc.TrainerSpec.PARAMETERS) < set(spec.PARAMETERS)
  assert set(spec.INPUTS) == set(sc.TrainerSpec.INPUTS) | {"anomalies"}
  assert set(spec.OUTPUTS) == set(sc.TrainerSpec.OUTPUTS)
  for key in (constants.STRATEGY_KEY, constants.LOCAL_WORKERS_KEY, constants.LOCAL_PS_KEY):
    assert key in spec.PARAMETERS


def test_default_module_is_used_by_module_path():
  examples, schema = _channels()
  trainer = DistributedTrainer(examples=examples, schema=schema)
  assert trainer.exec_properties[sc.MODULE_PATH_KEY] == defaults.DEFAULT_MODULE_PATH
  assert not trainer.exec_properties.get(sc.MODULE_FILE_KEY)


def test_user_module_file_is_packaged_like_the_stock_trainer(monkeypatch):
  monkeypatch.delenv("UNSUPPORTED_DO_NOT_PACKAGE_USER_MODULES", raising=False)
  trainer = _trainer()
  assert trainer._pip_dependencies


@pytest.mark.parametrize(
  ("kwargs", "message"),
  [
    ({"strategy": "gpu"}, "unknown"),
    ({"local_ps": 1}, "needs workers"),
    ({"local_workers": 2, "strategy": "mirrored"}, "cannot use"),
    ({"local_workers": 2, "strategy": "one_device"}, "cannot use"),
    ({"local_workers": 2, "strategy": "tpu"}, "cannot use"),
    ({"local_workers": 2, "local_ps": 1, "strategy": "multi_worker_mirrored"}, "no parameter"),
    ({"local_workers": 2, "strategy": "parameter_server"}, "local_ps >= 1"),
    ({"local_workers": -1}, ">= 0"),
    ({"global_batch_size": 0}, "global_batch_size"),
    ({"mixed_precision": "float16"}, "mixed_float16"),
    ({"run_fn": "pkg.mod.run_fn"}, "not both"),
  ],
)
def test_nonsense_arguments_raise_a_trainer_input_error(kwargs, message):
  with pytest.raises(lib.TrainerInputError, match=message):
    _trainer(**kwargs)
