"""Benchmark: a 2-worker TFJob on the fake training operator next to the local 2-worker cluster.

Runs the DistributedTrainer executor's `Do` on the same digits Examples and steps, each run in
a fresh process, rounds interleaved: once with `local_workers=2` (two loopback processes that
`launch.py` starts) and once with a TFJob of two Worker replicas (MultiWorkerMirrored) that the
step creates on `tests/support/fake_kubernetes.py`, the standard-library API server and operator on
loopback that runs each replica as a local process. It reports the step's wall time,
examples/s from the Model artifact, and the operator round trip from the fake's own timeline:
create -> every replica started, and last replica exit -> the step's first read of the
Succeeded condition (split into the operator's reconcile and the step's poll).

    .venv/bin/python bench/tfjob.py [--repeats 2] [--steps 600]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The fake operator lives in tests/, beside components/.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common

from core import defaults, properties

CONFIGS = ("local cluster, 2 workers", "TFJob, 2 workers (fake operator)")
_LOCAL, _TFJOB = CONFIGS


def _child(label: str, inputs_json: str, out: str, steps: int) -> dict:
  """Runs one `Do` in this process and returns its measurements."""
  from tfx.proto import trainer_pb2
  from tfx.types import artifact_utils, standard_artifacts
  from tfx.types import standard_component_specs as sc
  from tfx.utils import json_utils, proto_utils

  from components.distributed_trainer import constants, executor, tfjob_manifest
  from tests.support.fake_kubernetes import FakeKubernetes

  with open(inputs_json) as f:
    inputs = artifact_utils.parse_artifact_dict(f.read())
  model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
  model.uri, model_run.uri = os.path.join(out, "model"), os.path.join(out, "model_run")
  outputs = {sc.MODEL_KEY: [model], sc.MODEL_RUN_KEY: [model_run]}
  props = {
    sc.TRAIN_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.TrainArgs(num_steps=steps)),
    sc.EVAL_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.EvalArgs()),
    sc.MODULE_PATH_KEY: defaults.DEFAULT_MODULE_PATH,
    sc.CUSTOM_CONFIG_KEY: json_utils.dumps(None),
    constants.STRATEGY_KEY: "multi_worker_mirrored",
    constants.LOCAL_WORKERS_KEY: 0,
    constants.LOCAL_PS_KEY: 0,
    constants.GLOBAL_BATCH_SIZE_KEY: defaults.GLOBAL_BATCH_SIZE,
    constants.WORKER_TIMEOUT_KEY: 900,
  }
  fake = None
  if label == _LOCAL:
    props[constants.LOCAL_WORKERS_KEY] = 2
  else:
    # The step's own defaults: poll every tfjob_manifest.DEFAULT_POLL_S.
    props[constants.TFJOB_KEY] = tfjob_manifest.TFJobSettings(workers=2, image="bench").to_json()
    env = {**os.environ, "PYTHONPATH": common.REPO_ROOT}
    fake = FakeKubernetes(namespace="bench", base_env=env, cwd=common.REPO_ROOT).start()
    os.environ["KUBECONFIG"] = fake.write_kubeconfig(os.path.join(out, "kubeconfig"))
  try:
    start = time.time()
    executor.Executor().Do(inputs, outputs, props)
    end = time.time()
  finally:
    if fake is not None:
      fake.stop()
  custom = model.mlmd_artifact.custom_properties
  result = {
    "label": label,
    "step_s": end - start,
    "examples_per_sec": custom[properties.EXAMPLES_PER_SEC_PROPERTY].double_value,
    "accuracy": custom[properties.EVAL_ACCURACY_PROPERTY].double_value,
    "strategy": custom[properties.STRATEGY_PROPERTY].string_value,
  }
  if fake is not None:
    created = fake.times("job-created")[0]
    started = fake.times("container-started")
    seen = fake.times("finished-served")[0]
    succeeded = fake.times("condition", "Succeeded")[0]
    last_exit = max(t for t in fake.times("container-exited") if t <= succeeded)
    result.update(
      before_create_s=created - start,
      create_to_started_s=max(started) - created,
      exit_to_succeeded_s=succeeded - last_exit,
      succeeded_to_seen_s=seen - succeeded,
      exit_to_seen_s=seen - last_exit,
      seen_to_done_s=end - seen,
    )
  return result


def _write_inputs(root: str) -> str:
  from tfx.types import artifact_utils

  from tests.support import example_files

  csv = os.path.join(common.REPO_ROOT, "data", "digits", "digits.csv")
  inputs, _ = example_files.trainer_artifacts(root, csv)
  path = os.path.join(root, "inputs.json")
  with open(path, "w") as f:
    f.write(artifact_utils.jsonify_artifact_dict(inputs))
  return path


def to_markdown(rows: list[dict], steps: int) -> str:
  table = common.markdown_table(
    [
      "configuration",
      "runs",
      "trainer step s",
      "process s",
      "examples/s",
      "create -> replicas started s",
      "last exit -> Succeeded s",
      "Succeeded -> seen by step s",
      "trainer accuracy",
    ],
    [
      [
        r["label"],
        r["runs"],
        r["step_s"],
        r["wall_s"],
        f"{r['examples_per_sec']:,.0f}",
        r.get("create_to_started_s", "-"),
        r.get("exit_to_succeeded_s", "-"),
        r.get("succeeded_to_seen_s", "-"),
        f"{r['accuracy']:.4f}",
      ]
      for r in rows
    ],
  )
  local, tfjob = rows
  return (
    f"{table}\n\nThe DistributedTrainer executor's `Do` on digits (default tabular model, "
    f"global batch {defaults.GLOBAL_BATCH_SIZE}, {steps} steps in {defaults.NUM_EPOCHS} "
    "epochs, MultiWorkerMirroredStrategy on two processes), each run in a fresh process, "
    "rounds interleaved; medians of the runs listed. *trainer step s* is `Do` from start to "
    "end (replica start-up, training, the chief's evaluation and export, and for the TFJob "
    "the spec, create, wait, log copy and delete); *process s* adds the process's imports. "
    "*examples/s* is the Model artifact's `train_examples_per_sec`. The TFJob's replicas run "
    "as local processes of `tests/support/fake_kubernetes.py`, the loopback stand-in for the API "
    "server and the training operator, so the last three columns are that stand-in's round "
    "trip, from its own timeline: job created -> the last replica's process started (the "
    "operator's reconcile and the kubelet's start; no scheduling, image pull or DNS here), "
    "the last replica's exit -> the Succeeded condition, and Succeeded -> the step's first "
    f"read of it (the step polls every {_poll_s():g} s). TFJob step time / local cluster "
    f"step time: {tfjob['step_s'] / local['step_s']:.2f}x "
    f"({tfjob['step_s'] - local['step_s']:+.1f} s). Both share the same two cores.\n"
  )


def _poll_s() -> float:
  from components.distributed_trainer import tfjob_manifest

  return tfjob_manifest.DEFAULT_POLL_S


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=defaults.TRAIN_STEPS)
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--json")
  parser.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
  parser.add_argument("--inputs", help=argparse.SUPPRESS)
  parser.add_argument("--out", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    print(json.dumps(_child(args.child, args.inputs, args.out, args.steps)))
    return {}
  root = tempfile.mkdtemp(prefix="bench-tfjob-")
  runs = []
  try:
    inputs = _write_inputs(root)
    for round_ in range(args.repeats):
      for label in CONFIGS:
        out = tempfile.mkdtemp(dir=root)
        cmd = [common.python(), os.path.abspath(__file__), "--child", label, "--inputs", inputs]
        r = common.run_measured([*cmd, "--out", out, "--steps", str(args.steps)])
        if r["returncode"] != 0:
          raise RuntimeError(f"{label} failed:\n{r.get('stderr_tail')}")
        r["round"] = round_ + 1
        runs.append(r)
        print(
          f"  round {round_ + 1} {label}: step {r['step_s']:.1f} s, "
          f"{r['examples_per_sec']:,.0f} examples/s",
          flush=True,
        )
  finally:
    shutil.rmtree(root, ignore_errors=True)
  rows = []
  for label in CONFIGS:
    mine = [r for r in runs if r["label"] == label]
    row = {"label": label, "runs": len(mine)}
    for key in mine[0]:
      if isinstance(mine[0][key], float) and key != "round":
        row[key] = round(common.median([r[key] for r in mine]), 2)
    rows.append(row)
  report = {
    "machine": common.machine(),
    "runs": runs,
    "results": rows,
    "markdown": to_markdown(rows, args.steps),
  }
  print(report["markdown"])
  if args.json:
    with open(args.json, "w") as f:
      json.dump(report, f, indent=2)
  return report


if __name__ == "__main__":
  main()
