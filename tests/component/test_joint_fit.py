"""A small table's ensemble trained in one pass (models/tabular/joint_fit.py) ends exactly as the
members fitted one after another end: the same weights, epochs, kept epochs and chart."""

import json
import os

import pytest
from tfx.proto import trainer_pb2
from tfx.types import standard_component_specs as sc
from tfx.utils import json_utils, proto_utils

from components.distributed_trainer import constants, executor, trainer_api
from core import defaults, sources
from models.tabular import joint_fit
from tests.support import example_files, tensorboard_events


def _train(root, csv, monkeypatch, one_pass: bool) -> tuple[trainer_api.TrainResult, dict, list]:
  """The DistributedTrainer's executor with the default module and a data-sized plan, in this
  process on one device; returns (the chief's TrainResult, its plan, the chart's epochs).
  The model run's folder is `root`/model_run."""
  calls = []
  fit = joint_fit.fit

  def counted(*args, **kwargs):
    calls.append(1)
    return fit(*args, **kwargs)

  with monkeypatch.context() as patched:
    patched.setattr(joint_fit, "fit", counted)
    if not one_pass:
      patched.setattr(joint_fit, "applies", lambda *args: False)
    inputs, outputs = example_files.trainer_artifacts(str(root), str(csv))
    props = {
      sc.TRAIN_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.TrainArgs(num_steps=0)),
      sc.EVAL_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.EvalArgs()),
      sc.MODULE_PATH_KEY: defaults.DEFAULT_MODULE_PATH,
      sc.CUSTOM_CONFIG_KEY: json_utils.dumps(None),
      constants.STRATEGY_KEY: "auto",
    }
    executor.Executor().Do(inputs, outputs, props)
  assert len(calls) == (1 if one_pass else 0)
  run_dir = outputs[sc.MODEL_RUN_KEY][0].uri
  result = trainer_api.read_result(trainer_api.result_path(run_dir, "chief", 0))
  chart = []
  if os.path.exists(os.path.join(run_dir, sources.EPOCH_HISTORY_FILE)):
    with open(os.path.join(run_dir, sources.EPOCH_HISTORY_FILE)) as f:
      chart = json.load(f)["epochs"]
  return result, result.plan, chart


def _epoch_losses(run_dir) -> dict[str, list[float]]:
  """The `epoch_loss*` scalars TensorBoard holds for the training batches, by tag."""
  out: dict[str, list[float]] = {}
  for run, tag, _, value in tensorboard_events.scalars(os.path.join(run_dir, "logs")):
    if run == "train" and tag.startswith("epoch_loss"):
      out.setdefault(tag, []).append(value)
  return out


@pytest.mark.timeout(600)
def test_one_pass_trains_each_member_as_its_own_fit_did(tmp_path, digits_csv, monkeypatch):
  # 500 rows of the digits: 3 networks and a linear model, each stopped early by its own
  # held-out loss, in well under a minute.
  small = tmp_path / "digits.csv"
  with open(digits_csv) as f:
    small.write_text("".join(line for _, line in zip(range(501), f, strict=False)))
  one, one_plan, one_chart = _train(tmp_path / "one", small, monkeypatch, one_pass=True)
  each, each_plan, each_chart = _train(tmp_path / "each", small, monkeypatch, one_pass=False)
  assert one_plan["ensemble"] == 3 and one_plan["linear"] is not None
  epochs = [m["epochs_run"] for m in one_plan["members"]] + [one_plan["linear"]["epochs_run"]]
  # The members stopped at epochs of their own, before the plan's last one.
  assert len(set(epochs)) > 1 and max(epochs) < one_plan["epochs"], epochs
  assert one_plan["members"] == each_plan["members"]
  assert one_plan["linear"] == each_plan["linear"]
  assert one_plan["readings"] == each_plan["readings"]
  assert one.weights_sha256 == each.weights_sha256
  assert one.eval_metrics == each.eval_metrics
  # The chart is the first member's, epoch by epoch, with its learning-rate cuts.
  assert one_chart == each_chart
  assert len(one_chart) == one_plan["members"][0]["epochs_run"]
  assert {"loss", "accuracy", "val_loss", "val_accuracy", "lr"} <= set(one_chart[0])
  # Both count every member's steps (a stopped member's are not run).
  assert one.steps_run == each.steps_run
  # TensorBoard has each member's training loss for the epochs it trained, and none after.
  losses = _epoch_losses(tmp_path / "one" / "model_run")
  assert sorted(losses) == [f"epoch_loss_{i}" for i in range(4)], sorted(losses)
  assert [len(losses[f"epoch_loss_{i}"]) for i in range(4)] == epochs
  assert all(value > 0 for values in losses.values() for value in values)


@pytest.mark.timeout(600)
def test_a_stopped_pass_resumes_with_the_members_that_had_stopped_as_they_were(
  tmp_path, digits_csv, monkeypatch
):
  """A pass that ends in an error after a backup resumes from it on the next run: the members
  that had stopped keep their weights and their records, the others go on from their state."""
  import dataclasses

  import tensorflow as tf

  class Killed(Exception):
    pass

  stopped = {}
  fit = trainer_api.fit

  def killed_at_epoch_100(model, built, dataset_fn, config):
    members = list(config.stopping)

    class Kill(tf.keras.callbacks.Callback):
      def on_epoch_end(self, epoch, logs=None):
        if epoch == 99:
          stopped.update({m.index: m.record for m in members if m.record})
          raise Killed()

    # After the members' own callbacks. An error keeps the last backup, as a kill does.
    return fit(model, built, dataset_fn, dataclasses.replace(config, stopping=[*members, Kill()]))

  with monkeypatch.context() as patched:
    patched.setattr(trainer_api, "fit", killed_at_epoch_100)
    with pytest.raises(Killed):
      _train(tmp_path, digits_csv, monkeypatch, one_pass=True)
  result, plan, _ = _train(tmp_path, digits_csv, monkeypatch, one_pass=True)
  records = [*plan["members"], {k: plan["linear"][k] for k in ("epochs_run", "best_epoch")}]
  restart = result.initial_epoch  # the epoch after the last backup
  assert 0 < restart < 100
  # A member that had stopped by the last backup kept its record (and its weights); one that
  # stopped after it, or was still running, trained on from its restored state.
  kept = [i for i, record in stopped.items() if record["epochs_run"] <= restart]
  assert kept, (stopped, restart)
  assert [records[i] for i in kept] == [stopped[i] for i in kept]
  resumed = [i for i in range(4) if i not in kept]
  assert resumed and all(records[i]["epochs_run"] > restart for i in resumed), (records, restart)
  assert result.eval_accuracy >= 0.95
