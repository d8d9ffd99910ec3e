"""The trainer's fit against a plain Keras fit of the same network on rows already in memory.

Reads a finished run of `run_local.py` (its output folder): the trained network's dense layers
from the Model's variables, and the batch size, round length and examples per second of the
trainer's fit from its result file. Then fits a network of exactly those layers, with Adam, in
batches of the same size, on random float32 rows held in memory (one round's worth, cached), in
a fresh process for each repeat. The plain fit does no input, no preprocessing layers, no
validation and no backups: it is the cost of the network's arithmetic on this machine, the
floor under the trainer's fit. A ratio near 1 means the fit runs at the speed of its network,
and only a smaller network or fewer rows would make it faster.

    .venv/bin/python bench/fit_floor.py --run OUT_DIR [--repeats 3] [--rounds 3]
        [--steps-per-execution N, when the run set one]

Only single-network runs are measured (tables over the ensemble's row limit, such as
`bench/scale.py`'s); an ensemble's model is not one chain of dense layers.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

from components import model_contract
from components.distributed_trainer import trainer_api
from core import defaults


def _newest_execution(run_dir: str, output: str) -> str:
  """The folder of the trainer's `output` ('model' or 'model_run') of its newest execution."""
  pattern = os.path.join(run_dir, "pipeline_root", "DistributedTrainer", output, "*")
  folders = [p for p in glob.glob(pattern) if os.path.basename(p).isdigit()]
  if not folders:
    raise SystemExit(f"No trained model under {run_dir}; pass the output folder of a run.")
  return max(folders, key=lambda p: int(os.path.basename(p)))


def trainer_result(run_dir: str) -> trainer_api.TrainResult:
  """The chief's result of the run's newest trainer execution."""
  path = trainer_api.result_path(_newest_execution(run_dir, "model_run"), "chief", 0)
  if not os.path.exists(path):
    raise SystemExit(f"No trainer result under {run_dir}; pass the output folder of a run.")
  return trainer_api.read_result(path)


def dense_chain(run_dir: str) -> list[tuple[int, int]]:
  """The (inputs, units) of each dense layer of the run's newest Model, in order."""
  import tensorflow as tf

  model = os.path.join(_newest_execution(run_dir, "model"), model_contract.SERVING_DIR)
  kernels = []
  for name, shape in tf.train.list_variables(os.path.join(model, "variables", "variables")):
    if name.endswith("/kernel/.ATTRIBUTES/VARIABLE_VALUE") and "optimizer" not in name.lower():
      index = int(name.split("/")[0].rsplit("-", 1)[1])
      kernels.append((index, tuple(shape)))
  chain = [shape for _, shape in sorted(kernels)]
  if not chain or any(a[1] != b[0] for a, b in itertools.pairwise(chain)):
    raise SystemExit(
      f"The model's dense layers {chain} are not one chain (an ensemble?); run this on a "
      "single-network run, such as bench/scale.py's tables."
    )
  return chain


def plain_fit(chain: list[tuple[int, int]], batch: int, steps: int, rounds: int, spe: int) -> float:
  """Rows a second of a plain Keras fit of `chain` (after one round of warm-up)."""
  import numpy as np
  import tensorflow as tf

  rng = np.random.default_rng(0)
  x = rng.normal(size=(batch * steps, chain[0][0])).astype("float32")
  y = rng.integers(0, chain[-1][1], size=batch * steps).astype("int32")
  inputs = tf.keras.Input((chain[0][0],))
  h = inputs
  for i, (_, units) in enumerate(chain):
    h = tf.keras.layers.Dense(units, activation="relu" if i < len(chain) - 1 else None)(h)
  model = tf.keras.Model(inputs, h)
  model.compile(
    tf.keras.optimizers.Adam(1e-3),
    tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    steps_per_execution=spe,
  )
  data = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True)
  data = data.cache().repeat()
  model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
  start = time.perf_counter()
  model.fit(data, epochs=rounds, steps_per_epoch=steps, verbose=0)
  return rounds * steps * batch / (time.perf_counter() - start)


def _child(args) -> None:
  spec = json.loads(args.child)
  rate = plain_fit([tuple(c) for c in spec["chain"]], *spec["fit"])
  print(json.dumps({"rows_per_s": rate}))


def _positive(text: str) -> int:
  """An argparse type: a whole number of at least 1."""
  try:
    value = int(text)
  except ValueError:
    value = 0
  if value < 1:
    raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
  return value


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--run", help="a finished run's output folder")
  parser.add_argument("--repeats", type=_positive, default=3)
  parser.add_argument("--rounds", type=_positive, default=3, help="timed rounds in each repeat")
  parser.add_argument(
    "--steps-per-execution",
    type=_positive,
    default=defaults.STEPS_PER_EXECUTION,
    help="the run's --steps-per-execution (its result does not record it)",
  )
  parser.add_argument("--child", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    _child(args)
    return {}
  if not args.run:
    parser.error("--run OUT_DIR is required")
  result = trainer_result(args.run)
  if "batch_size" not in result.plan:
    raise SystemExit(
      f"The trainer of {args.run} recorded no training plan (its module, "
      f"{result.module_style!r}, sized its own batches); run this on a run of the default model."
    )
  chain = dense_chain(args.run)
  batch = int(result.plan["batch_size"])
  steps = int(result.steps_per_epoch)
  spe = args.steps_per_execution
  spec = json.dumps({"chain": chain, "fit": [batch, steps, args.rounds, spe]})
  rates = []
  for _ in range(args.repeats):
    proc = subprocess.run(
      [common.python(), os.path.abspath(__file__), "--child", spec],
      env=common.child_env(),
      capture_output=True,
      text=True,
      check=True,
    )
    rates.append(json.loads(proc.stdout.strip().splitlines()[-1])["rows_per_s"])
  plain = common.median(rates)
  ours = float(result.train_examples_per_sec)
  out = {
    "machine": common.machine(),
    "run": os.path.abspath(args.run),
    "network": " -> ".join([str(chain[0][0])] + [str(units) for _, units in chain]),
    "batch_size": batch,
    "steps_per_round": steps,
    "steps_per_execution": spe,
    "plain_fit_rows_per_s": [round(r) for r in rates],
    "plain_fit_median": round(plain),
    "trainer_rows_per_s": round(ours),
    "trainer_fit_seconds": round(float(result.train_seconds), 1),
    "rows_read": int(result.steps_run) * batch,
    "plain_over_trainer": round(plain / ours, 2),
  }
  print(json.dumps(out, indent=1))
  print(f"written to {common.write_results('fit-floor', out)}")
  return out


if __name__ == "__main__":
  main()
