"""Entry point of one DistributedTrainer cluster process: serve (ps/PS worker) or train.

  python -m components.distributed_trainer.worker --spec <model_run>/distributed_trainer/spec.json

The role comes from TF_CONFIG. In a parameter-server cluster the 'ps' and 'worker' tasks
host a tf.distribute.Server until they are stopped; every other task (chief/coordinator,
MultiWorkerMirrored workers) runs the executor's training code on the artifacts in the spec.
"""

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence

from components import memory
from components.distributed_trainer import launch, strategy_lib


def serve(job: str, index: int) -> None:
  """Hosts a tf.distribute.Server for (job, index) of TF_CONFIG's cluster until killed.

  Args:
    job: 'ps' or 'worker'.
    index: task index.
  """
  # The coordinator, not gRPC, decides how to handle unreachable peers (TF's PS guide).
  os.environ["GRPC_FAIL_FAST"] = "use_caller"
  import tensorflow as tf

  memory.freeze_imports()
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  server = tf.distribute.Server(
    resolver.cluster_spec(),
    job_name=job,
    task_index=index,
    protocol=resolver.rpc_layer or "grpc",
    start=True,
  )
  logging.getLogger(__name__).info("serving %s:%d at %s", job, index, server.target)
  server.join()


def train(spec_path: str) -> None:
  """Runs the executor's training code for the artifacts in a spec file.

  Args:
    spec_path: JSON written by the executor (input_dict, output_dict, exec_properties);
      local path or any tf.io.gfile URI.
  """
  import tensorflow as tf
  from tfx.types import artifact_utils

  from components.distributed_trainer import executor

  memory.freeze_imports()
  # gfile, so the spec may live on gs:// when the replicas are TFJob pods.
  with tf.io.gfile.GFile(spec_path) as f:
    spec = json.load(f)
  executor.Executor().train(
    artifact_utils.parse_artifact_dict(spec["input_dict"]),
    artifact_utils.parse_artifact_dict(spec["output_dict"]),
    spec["exec_properties"],
    attempt=int(os.environ.get(launch.ATTEMPT_ENV, "0")),
  )


def main(argv: Sequence[str] | None = None) -> int:
  """Parses --spec and runs this process's role."""
  parser = argparse.ArgumentParser(prog="python -m components.distributed_trainer.worker")
  parser.add_argument("--spec", required=True, help="spec.json written by the executor")
  args = parser.parse_args(argv)
  # Our INFO lines (strategy, progress) without the INFO chatter of every TFX dependency.
  logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
  logging.getLogger("components").setLevel(logging.INFO)
  task = strategy_lib.task_of(strategy_lib.tf_config_from_env())
  from components.distributed_trainer import cluster_profiler

  cluster_profiler.start_profiler_server(*task)
  role = strategy_lib.server_role(strategy_lib.tf_config_from_env())
  if role:
    serve(*role)
  else:
    train(args.spec)
  return 0


if __name__ == "__main__":
  sys.exit(main())
