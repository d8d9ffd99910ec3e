"""components.beam_args: which runner the Beam arguments name, and whether it runs here."""

import pytest

from components import arguments, beam_args
from components.example_gen import example_gen_lib


@pytest.mark.parametrize(
  ("args", "expected"),
  [
    ([], None),
    (["--runner=DirectRunner"], None),
    (["--runner", "direct"], None),
    (["--runner=apache_beam.runners.direct.direct_runner.SwitchingDirectRunner"], None),
    (["--runner=DataflowRunner", "--project=p"], "DataflowRunner"),
    (["--runner", "FlinkRunner", "--flink_master=localhost:8081"], "FlinkRunner"),
    # The last one named wins, as in Beam's own parser.
    (["--runner=DataflowRunner", "--runner=DirectRunner"], None),
    (["--runner=DirectRunner", "--runner=SparkRunner"], "SparkRunner"),
  ],
)
def test_distributed_runner(args, expected):
  assert beam_args.distributed_runner(args) == expected


def test_flag_value_reads_both_spellings_and_ignores_a_missing_value():
  assert arguments.flag_value(["--direct_num_workers", "4"], "--direct_num_workers") == "4"
  assert arguments.flag_value(["--direct_num_workers=2"], "--direct_num_workers") == "2"
  assert arguments.flag_value(["--direct_num_workers"], "--direct_num_workers") is None
  assert arguments.flag_value(["--direct_num_workers_x=2"], "--direct_num_workers") is None
  # The last one wins, as in argparse; a container's arguments are read the same way.
  assert arguments.flag_value(["--night_id", "a", "--night_id=b"], "--night_id") == "b"


@pytest.mark.parametrize(
  ("args", "parallel"),
  [
    ([], True),
    (["--runner=DirectRunner"], True),
    (["--runner=DataflowRunner"], False),
    (["--direct_running_mode=in_memory"], False),
  ],
)
def test_example_gen_adds_direct_workers_only_for_a_local_runner_left_to_choose(
  args, parallel, monkeypatch
):
  monkeypatch.setattr(example_gen_lib, "cpu_count", lambda: 2)
  out = example_gen_lib.direct_runner_args(args, num_units=4, total_bytes=1 << 30)
  assert ("--direct_running_mode=multi_processing" in out) is parallel
  assert out[: len(args)] == args
