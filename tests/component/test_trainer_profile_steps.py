"""--profile-steps at the DistributedTrainer's executor: a TensorBoard profile of the asked steps,
from every worker of a local cluster.

The executor runs with the execution properties `run_local.py` gives it for the same flags, on
the bundled digits after ExampleGen, StatisticsGen, SchemaGen and ExampleValidator
(`tests/support/executor_runs`).
"""

import pytest

from pipeline.definition import nodes
from tests.support import executor_runs
from tests.support.cli_runs import REPO_ROOT

DIGITS = ("--data-root", REPO_ROOT / "data" / "digits")
FAST = ("--optimizer-variants", "none", "--tensorrt", "off", "--quiet")


def _traces(out):
  root = out / "pipeline_root" / "DistributedTrainer" / "model_run"
  return sorted(p.name for p in root.glob("*/logs/plugins/profile/*/*.xplane.pb"))


def _train(out, *flags) -> dict:
  """The trainer's execution after the data nodes; returns what run_summary.json would say."""
  run = executor_runs.executed([*DIGITS, *flags, *FAST], out, [*executor_runs.DATA, nodes.TRAINER])
  return run.summary()


@pytest.mark.multiprocess
@pytest.mark.timeout(900)
def test_two_worker_cluster_profile_has_a_trace_of_each_worker(tmp_path):
  out = tmp_path / "out"
  summary = _train(
    out,
    *("--local-workers", "2", "--strategy", "multi_worker_mirrored"),
    *("--profile-steps", "20,60", "--train-steps", "200"),
  )
  traces = _traces(out)
  # One trace per worker process, named after the host and port of its profiler server.
  assert len(traces) == 2 and len({t.split("_")[-1] for t in traces}) == 2, traces
  assert summary["status"] == "succeeded"


@pytest.mark.timeout(600)
def test_single_process_profile(tmp_path):
  out = tmp_path / "out"
  _train(out, "--profile-steps", "5,15", "--train-steps", "100")
  assert len(_traces(out)) == 1
