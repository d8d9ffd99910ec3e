"""--profile-steps: a TensorBoard profile of the asked steps, from every worker of a cluster."""

import pytest

from tests.support.cli_runs import load_summary, run_script

pytestmark = [pytest.mark.e2e, pytest.mark.multiprocess]

FAST = ("--optimizer-variants", "none", "--tensorrt", "off", "--quiet")


def _traces(out):
  root = out / "pipeline_root" / "DistributedTrainer" / "model_run"
  return sorted(p.name for p in root.glob("*/logs/plugins/profile/*/*.xplane.pb"))


@pytest.mark.timeout(900)
def test_two_worker_cluster_profile_has_a_trace_of_each_worker(tmp_path):
  out = tmp_path / "out"
  proc = run_script(
    "run_local.py",
    "--output-dir",
    out,
    "--local-workers",
    "2",
    "--strategy",
    "multi_worker_mirrored",
    "--profile-steps",
    "20,60",
    "--train-steps",
    "200",
    *FAST,
    timeout=800,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  traces = _traces(out)
  # One trace per worker process, named after the host and port of its profiler server.
  assert len(traces) == 2 and len({t.split("_")[-1] for t in traces}) == 2, traces
  assert load_summary(out)["status"] == "succeeded"


@pytest.mark.timeout(600)
def test_single_process_profile(tmp_path):
  out = tmp_path / "out"
  proc = run_script(
    "run_local.py", "--output-dir", out, "--profile-steps", "5,15", "--train-steps", "100", *FAST
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert len(_traces(out)) == 1
