"""Real multi-process DistributedTrainer runs on loopback: MWMS, parameter server, restarts."""

import json
import os
import signal
import textwrap
import threading
import time

import pytest
from tfx.proto import trainer_pb2
from tfx.types import standard_component_specs as sc
from tfx.utils import json_utils, proto_utils

from components.distributed_trainer import constants, executor, launch, trainer_api
from core import defaults, properties
from tests.support import example_files, trainer_progress, warm_python

STEPS = 300
BATCH = 64

# A stock-Trainer module that knows nothing about strategies or clusters.
STOCK_MODULE = textwrap.dedent("""
  import json, os
  import tensorflow as tf
  from tensorflow_metadata.proto.v0 import schema_pb2
  from tensorflow_transform.tf_metadata import schema_utils
  from tfx import v1 as tfx
  from tfx_bsl.public import tfxio

  _KEYS = [f"pixel_{i}" for i in range(64)]


  def run_fn(fn_args):
    schema = tfx.utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
    options = tfxio.TensorFlowDatasetOptions(batch_size=32, label_key="label")
    train = fn_args.data_accessor.tf_dataset_factory(fn_args.train_files, options, schema)
    inputs = [tf.keras.layers.Input(shape=(1,), name=k, dtype=tf.int64) for k in _KEYS]
    x = tf.keras.layers.concatenate([tf.cast(i, tf.float32) / 16.0 for i in inputs])
    outputs = tf.keras.layers.Dense(10, activation="softmax")(x)
    model = tf.keras.Model(inputs, outputs)
    model.compile(tf.keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy")
    model.fit(train.repeat(), steps_per_epoch=fn_args.train_steps, verbose=0)
    spec = schema_utils.schema_as_feature_spec(schema).feature_spec
    spec.pop("label")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples):
      return {"outputs": model(tf.io.parse_example(examples, spec))}

    model.save(fn_args.serving_model_dir, save_format="tf", signatures={"serving_default": serve})
    name = f"{fn_args.task_type}-{fn_args.task_index}.json"
    with open(os.path.join(fn_args.model_run_dir, name), "w") as f:
      json.dump({"serving_model_dir": fn_args.serving_model_dir, "chief": fn_args.is_chief}, f)
""")


@pytest.fixture(autouse=True)
def warm_workers(monkeypatch):
  """Each cluster process is a child of a warm pool rather than a fresh Python: these tests
  are about what the cluster does, and a SIGKILL reaches a child as it reaches a process
  (the launcher's own tests, in tests/fast/test_trainer_launch.py, start fresh ones)."""
  monkeypatch.setattr(launch, "_spawn", warm_python.spawn_module)


def _props(steps=STEPS, **kw):
  props = {
    sc.TRAIN_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.TrainArgs(num_steps=steps)),
    sc.EVAL_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.EvalArgs()),
    sc.MODULE_PATH_KEY: defaults.DEFAULT_MODULE_PATH,
    sc.CUSTOM_CONFIG_KEY: json_utils.dumps(None),
    constants.STRATEGY_KEY: "auto",
    constants.LOCAL_WORKERS_KEY: 0,
    constants.LOCAL_PS_KEY: 0,
    constants.GLOBAL_BATCH_SIZE_KEY: BATCH,
    constants.WORKER_TIMEOUT_KEY: 240,
  }
  props.update(kw)
  return props


def _custom(artifact):
  return artifact.mlmd_artifact.custom_properties


def _run(root, csv, **kw):
  inputs, outputs = example_files.trainer_artifacts(str(root), str(csv))
  executor.Executor().Do(inputs, outputs, _props(**kw))
  return outputs[sc.MODEL_KEY][0], outputs[sc.MODEL_RUN_KEY][0].uri


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_multi_worker_mirrored_two_processes_match_single_worker(tmp_path, digits_csv):
  model, run_dir = _run(tmp_path / "mwms", digits_csv, **{constants.LOCAL_WORKERS_KEY: 2})
  props = _custom(model)
  assert props[properties.STRATEGY_PROPERTY].string_value == "multi_worker_mirrored"
  assert props[properties.NUM_REPLICAS_PROPERTY].int_value == 2
  assert props[properties.NUM_WORKERS_PROPERTY].int_value == 2
  assert "2 workers" in props[properties.STRATEGY_REASON_PROPERTY].string_value
  w0 = trainer_api.read_result(trainer_api.result_path(run_dir, "worker", 0))
  w1 = trainer_api.read_result(trainer_api.result_path(run_dir, "worker", 1))
  assert w0.is_chief and not w1.is_chief
  assert w0.weights_sha256 == w1.weights_sha256  # synchronous training: identical weights
  assert w1.eval_accuracy is None  # only the chief evaluates and exports
  assert os.path.exists(os.path.join(model.uri, "Format-Serving", "assets.extra", "contract.json"))
  assert not os.path.exists(trainer_api.run_state_dir(run_dir, "scratch"))

  single, _ = _run(tmp_path / "single", digits_csv)
  assert _custom(single)[properties.STRATEGY_PROPERTY].string_value == "one_device"
  multi_accuracy = props[properties.EVAL_ACCURACY_PROPERTY].double_value
  single_accuracy = _custom(single)[properties.EVAL_ACCURACY_PROPERTY].double_value
  assert single_accuracy >= 0.9
  assert abs(multi_accuracy - single_accuracy) <= 0.01


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_parameter_server_one_ps_two_workers(tmp_path, digits_csv):
  model, run_dir = _run(
    tmp_path, digits_csv, **{constants.LOCAL_WORKERS_KEY: 2, constants.LOCAL_PS_KEY: 1}
  )
  props = _custom(model)
  assert props[properties.STRATEGY_PROPERTY].string_value == "parameter_server"
  assert "1 ps task(s) and 2 worker(s)" in props[properties.STRATEGY_REASON_PROPERTY].string_value
  assert props[properties.EVAL_ACCURACY_PROPERTY].double_value >= 0.85
  logs = os.listdir(trainer_api.run_state_dir(run_dir, "cluster_logs", "attempt-0"))
  assert sorted(logs) == ["chief-0.log", "pids.json", "ps-0.log", "worker-0.log", "worker-1.log"]
  # Only the coordinator ran training code; ps and workers only served.
  results = os.listdir(trainer_api.run_state_dir(run_dir, "results"))
  assert results == ["chief-0.json"]


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_parameter_server_trains_a_small_tables_ensemble(tmp_path, digits_csv):
  # A data-sized plan (no --train-steps) on a table under 50,000 rows averages 3 networks, under
  # a ClusterCoordinator too; Keras runs no validation there, so each runs its epochs in full.
  hparams = {properties.HPARAMS_CONFIG: {"max_epochs": 3}}
  model, run_dir = _run(
    tmp_path,
    digits_csv,
    steps=0,
    **{
      constants.LOCAL_WORKERS_KEY: 2,
      constants.LOCAL_PS_KEY: 1,
      sc.CUSTOM_CONFIG_KEY: json_utils.dumps(hparams),
    },
  )
  props = _custom(model)
  assert props[properties.STRATEGY_PROPERTY].string_value == "parameter_server"
  plan = json.loads(props["training_plan"].string_value)
  assert (plan["ensemble"], plan["holdout_rows"]) == (3, 0)
  assert plan["members"] == [{"epochs_run": 3, "best_epoch": None}] * 3
  assert props[properties.EVAL_ACCURACY_PROPERTY].double_value >= 0.9
  assert os.listdir(trainer_api.run_state_dir(run_dir, "results")) == ["chief-0.json"]


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_worker_killed_mid_training_resumes_from_backup(tmp_path, digits_csv):
  root = tmp_path / "ft"
  run_dir = str(root / "model_run")
  killed = {}

  def kill_worker_1_after_two_epochs():
    # Real SIGKILL from outside once the chief has finished (and backed up) >= 2 epochs.
    pids_file = trainer_api.run_state_dir(run_dir, "cluster_logs", "attempt-0", "pids.json")
    deadline = time.monotonic() + 200
    while time.monotonic() < deadline and not killed:
      ends = [
        e for e in trainer_progress.read_progress(run_dir, "worker", 0) if e["event"] == "epoch_end"
      ]
      if len(ends) >= 2 and os.path.exists(pids_file):
        with open(pids_file) as f:
          pid = json.load(f)["worker-1"]
        os.kill(pid, signal.SIGKILL)
        killed["pid"] = pid
        return
      time.sleep(0.05)

  killer = threading.Thread(target=kill_worker_1_after_two_epochs, daemon=True)
  killer.start()
  model, _ = _run(
    root,
    digits_csv,
    # Epochs of BACKUP_STEPS steps, so each one ends with a backup (shorter epochs are backed
    # up every BACKUP_STEPS steps instead).
    steps=6 * defaults.BACKUP_STEPS,
    **{
      constants.LOCAL_WORKERS_KEY: 2,
      constants.NUM_EPOCHS_KEY: 6,
      constants.MAX_RESTARTS_KEY: 1,
    },
  )
  killer.join(timeout=5)
  assert killed, "the worker was never killed"

  events = trainer_progress.read_progress(run_dir, "worker", 0)
  first_ends = [e["epoch"] for e in events if e["attempt"] == 0 and e["event"] == "epoch_end"]
  resumed = [e["epoch"] for e in events if e["attempt"] == 1 and e["event"] == "epoch_begin"]
  assert len(first_ends) >= 2
  # The restarted cluster began at the epoch after the last backed-up one, not at 0 ...
  assert resumed[0] == first_ends[-1] + 1 > 0
  assert resumed == list(range(resumed[0], 6))
  props = _custom(model)
  assert props[properties.RESTARTS_PROPERTY].int_value == 1
  assert props[properties.INITIAL_EPOCH_PROPERTY].int_value == resumed[0]
  # ... and still trained a good model.
  assert props[properties.EVAL_ACCURACY_PROPERTY].double_value >= 0.9
  with open(trainer_api.run_state_dir(run_dir, "cluster_logs", "attempt-0", "pids.json")) as f:
    assert json.load(f)["worker-1"] == killed["pid"]


@pytest.mark.multiprocess
@pytest.mark.timeout(200)
def test_worker_failure_without_restarts_surfaces_stderr(tmp_path, digits_csv):
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  props = _props(
    **{constants.LOCAL_WORKERS_KEY: 2},
    **{sc.CUSTOM_CONFIG_KEY: json_utils.dumps({"label_key": "no_such_label"})},
  )
  with pytest.raises(RuntimeError) as error:
    executor.Executor().Do(inputs, outputs, props)
  message = str(error.value)
  assert "exited with status 1" in message
  assert "no_such_label" in message  # the worker's own error, from its log tail
  assert not os.path.exists(os.path.join(outputs[sc.MODEL_KEY][0].uri, "Format-Serving"))


@pytest.mark.multiprocess
@pytest.mark.timeout(240)
def test_stock_run_fn_module_on_two_workers(tmp_path, digits_csv):
  module = tmp_path / "stock.py"
  module.write_text(STOCK_MODULE)
  model, run_dir = _run(
    tmp_path / "run",
    digits_csv,
    steps=60,
    **{sc.MODULE_PATH_KEY: None, sc.MODULE_FILE_KEY: str(module), constants.LOCAL_WORKERS_KEY: 2},
  )
  props = _custom(model)
  assert props[properties.STRATEGY_PROPERTY].string_value == "multi_worker_mirrored"
  assert props[properties.MODULE_STYLE_PROPERTY].string_value == "run_fn"
  with open(os.path.join(run_dir, "worker-0.json")) as f:
    chief = json.load(f)
  with open(os.path.join(run_dir, "worker-1.json")) as f:
    other = json.load(f)
  # Both workers saved (a distributed save needs all of them), but only the chief into the
  # artifact; the other one's scratch copy is gone.
  assert chief == {"serving_model_dir": os.path.join(model.uri, "Format-Serving"), "chief": True}
  assert other["chief"] is False and not os.path.exists(other["serving_model_dir"])
  assert os.path.exists(os.path.join(model.uri, "Format-Serving", "saved_model.pb"))
