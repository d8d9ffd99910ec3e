"""core.defaults: the shared defaults hold together, and the local cluster's process budget."""

import pytest

from core import defaults


@pytest.mark.parametrize(
  ("workers", "ps", "processes"), [(1, 0, 1), (4, 0, 4), (2, 1, 4), (3, 2, 6)]
)
def test_a_local_cluster_is_its_workers_its_parameter_servers_and_their_chief(
  workers, ps, processes
):
  assert defaults.local_cluster_processes(workers, ps) == processes


@pytest.mark.parametrize(("cpus", "limit"), [(None, 8), (1, 8), (2, 8), (3, 12), (16, 64)])
def test_a_local_cluster_may_start_four_processes_a_cpu_and_at_least_eight(
  monkeypatch, cpus, limit
):
  monkeypatch.setattr(defaults.os, "cpu_count", lambda: cpus)
  assert defaults.max_local_processes() == limit


def test_the_name_lists_hold_their_names_once_each():
  for names in (defaults.STRATEGY_NAMES, defaults.VARIANTS, defaults.TENSORRT_MODES):
    assert len(set(names)) == len(names)
  assert defaults.AUTO in defaults.STRATEGY_NAMES and defaults.TENSORRT_AUTO in (
    defaults.TENSORRT_MODES
  )


def test_the_default_variants_are_the_variants_in_order_but_the_opt_in_ones():
  opt_in = (defaults.QAT, defaults.TENSORRT_FP16)
  expected = tuple(v for v in defaults.VARIANTS if v not in opt_in)
  assert expected == defaults.DEFAULT_VARIANTS


def test_the_trainers_default_modules_are_module_paths_in_models():
  for path in (defaults.DEFAULT_MODULE_PATH, defaults.BUILD_MODEL_RUN_FN):
    assert path.startswith("models.") and "/" not in path and not path.endswith(".py")
