"""MirroredStrategy over two logical CPU devices vs OneDeviceStrategy on the digits model."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.support import example_files

# Logical devices must be configured before TensorFlow initialises its devices, so this runs
# in a fresh interpreter.
SCRIPT = textwrap.dedent("""
  import dataclasses, json, os, sys
  import tensorflow as tf

  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])

  from components.distributed_trainer import strategy_lib
  from models.tabular import module as default_module
  from models.tabular import plan as tabular_plan
  from models.tabular import runner

  root = sys.argv[1]
  results = {}
  for name in ("mirrored", "one_device"):
    built = strategy_lib.build_strategy(name, tf_config={}, tpu_available=False)
    settings = tabular_plan.RunSettings(
        train_files=[os.path.join(root, "examples", "Split-train", "*")],
        eval_files=[os.path.join(root, "examples", "Split-eval", "*")],
        schema_path=os.path.join(root, "schema", "schema.pbtxt"),
        serving_model_dir=os.path.join(root, name, "model", "Format-Serving"),
        model_run_dir=os.path.join(root, name, "model_run"),
        label_key="label", train_steps=300, hparams={"batch_size": 64})
    result = dataclasses.asdict(runner.train(settings, built, default_module._body))
    result["devices"] = list(built.strategy.extended.worker_devices)
    results[name] = result
  print("RESULTS=" + json.dumps(results))
""")


@pytest.mark.multiprocess
@pytest.mark.timeout(240)
def test_mirrored_two_logical_cpus_matches_one_device(tmp_path, digits_csv, repo_root):
  example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "PYTHONPATH": str(repo_root)}
  env.pop("TF_CONFIG", None)  # a single-process run
  done = subprocess.run(
    [sys.executable, "-c", SCRIPT, str(tmp_path)],
    env=env,
    capture_output=True,
    text=True,
    timeout=220,
    check=False,
  )
  assert done.returncode == 0, done.stderr[-3000:]
  line = next(x for x in done.stdout.splitlines() if x.startswith("RESULTS="))
  results = json.loads(line[len("RESULTS=") :])
  mirrored, single = results["mirrored"], results["one_device"]
  assert mirrored["strategy"] == "mirrored"
  assert mirrored["num_replicas_in_sync"] == 2
  assert len(mirrored["devices"]) == 2 and all("CPU" in d for d in mirrored["devices"])
  assert single["num_replicas_in_sync"] == 1
  assert single["eval_accuracy"] >= 0.9
  assert abs(mirrored["eval_accuracy"] - single["eval_accuracy"]) <= 0.01
  for name in ("mirrored", "one_device"):
    assert os.path.exists(tmp_path / name / "model" / "Format-Serving" / "saved_model.pb")
