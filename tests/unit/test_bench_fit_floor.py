"""bench/fit_floor.py reads a run's network and trainer figures, and refuses what it cannot
measure."""

import importlib

import pytest

from tests.support.cli_runs import REPO_ROOT


@pytest.fixture
def fit_floor(monkeypatch):
  monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))
  return importlib.import_module("fit_floor")


def _save(run_dir, execution: int, model) -> None:
  path = run_dir / "pipeline_root" / "DistributedTrainer" / "model" / str(execution)
  model.save(str(path / "Format-Serving"))


def _result(run_dir, execution: int, steps_per_epoch: int) -> None:
  from components.distributed_trainer import trainer_api

  result = trainer_api.TrainResult(
    "one_device", "test", 1, "chief", 0, True, "tabular", steps_per_epoch=steps_per_epoch
  )
  model_run = run_dir / "pipeline_root" / "DistributedTrainer" / "model_run" / str(execution)
  trainer_api.write_result(str(model_run), result)


def test_the_newest_models_dense_layers_are_read_in_order(fit_floor, tmp_path):
  import tensorflow as tf

  def network(widths):
    inputs = tf.keras.Input((widths[0],))
    h = tf.keras.layers.Normalization(mean=0.0, variance=1.0)(inputs)  # weights, no kernel
    for units in widths[1:]:
      h = tf.keras.layers.Dense(units)(h)
    return tf.keras.Model(inputs, h)

  _save(tmp_path, 7, network([5, 3, 2]))
  _save(tmp_path, 12, network([9, 16, 8, 4]))  # execution 12 is newer than 7, though "12" < "7"
  assert fit_floor.dense_chain(str(tmp_path)) == [(9, 16), (16, 8), (8, 4)]
  _result(tmp_path, 7, steps_per_epoch=1)
  _result(tmp_path, 12, steps_per_epoch=2)
  assert fit_floor.trainer_result(str(tmp_path)).steps_per_epoch == 2


def test_two_networks_side_by_side_are_refused_in_one_line(fit_floor, tmp_path):
  import tensorflow as tf

  inputs = tf.keras.Input((4,))
  a = tf.keras.layers.Dense(3)(tf.keras.layers.Dense(8)(inputs))
  b = tf.keras.layers.Dense(3)(tf.keras.layers.Dense(6)(inputs))
  _save(tmp_path, 1, tf.keras.Model(inputs, tf.keras.layers.Average()([a, b])))
  with pytest.raises(SystemExit, match="not one chain"):
    fit_floor.dense_chain(str(tmp_path))


def test_a_folder_without_a_run_is_named(fit_floor, tmp_path):
  with pytest.raises(SystemExit, match="pass the output folder of a run"):
    fit_floor.trainer_result(str(tmp_path))
  with pytest.raises(SystemExit, match="pass the output folder of a run"):
    fit_floor.dense_chain(str(tmp_path))


def test_the_plain_fit_measures_a_rate(fit_floor):
  assert fit_floor.plain_fit([(6, 4), (4, 3)], batch=8, steps=2, rounds=1, spe=1) > 0


@pytest.mark.parametrize("flag", ["--repeats", "--rounds", "--steps-per-execution"])
@pytest.mark.parametrize("value", ["0", "-2", "1.5", "x"])
def test_a_count_under_one_is_refused_by_the_parser(fit_floor, flag, value, capsys):
  with pytest.raises(SystemExit) as stopped:
    fit_floor.main(["--run", "anywhere", flag, value])
  assert stopped.value.code == 2
  assert f"{value!r} is not a whole number of at least 1" in capsys.readouterr().err


def test_a_run_whose_module_sized_its_own_batches_is_refused_in_one_line(fit_floor, tmp_path):
  _result(tmp_path, 3, steps_per_epoch=5)  # No plan, as a stock run_fn module's result has.
  with pytest.raises(SystemExit, match="recorded no training plan"):
    fit_floor.main(["--run", str(tmp_path)])
