"""Step counts for modules and profiled steps (components/distributed_trainer/steps_lib.py)."""

import json

import pytest
import tensorflow as tf
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import proto_utils

from components.distributed_trainer import steps_lib, trainer_api
from core.errors import UserInputError


def _examples(tmp_path, eval_records: int, rows_property: int | None = None):
  examples = standard_artifacts.Examples()
  examples.uri = str(tmp_path / "examples")
  examples.split_names = json.dumps(["train", "eval"])
  for split, count in (("train", 3), ("eval", eval_records)):
    folder = tmp_path / "examples" / f"Split-{split}"
    folder.mkdir(parents=True)
    with tf.io.TFRecordWriter(str(folder / "data.gz"), options="GZIP") as writer:
      for i in range(count):
        writer.write(f"record {i}".encode())
  if rows_property is not None:
    examples.set_int_custom_property("num_rows_eval", rows_property)
  return examples


def test_counts_records_when_the_artifact_has_no_row_count(tmp_path):
  assert steps_lib.count_examples([_examples(tmp_path, 130)], "eval") == 130


def test_reads_the_row_count_the_example_gen_recorded(tmp_path):
  assert steps_lib.count_examples([_examples(tmp_path, 5, rows_property=1000)], "eval") == 1000


@pytest.mark.parametrize(("rows", "steps"), [(0, 1), (1, 1), (64, 1), (65, 2), (640, 10)])
def test_default_eval_steps_are_one_pass_at_the_batch_size(rows, steps):
  assert steps_lib.default_eval_steps(rows, 64) == steps


def test_unset_eval_steps_become_positive_and_set_ones_stay(tmp_path):
  examples = [_examples(tmp_path, 130)]
  key = standard_component_specs.EVAL_ARGS_KEY
  unset = {key: proto_utils.proto_to_json(trainer_pb2.EvalArgs(num_steps=0))}
  props, filled = steps_lib.with_eval_steps(unset, examples, 64)
  assert filled == 3
  assert proto_utils.json_to_proto(props[key], trainer_pb2.EvalArgs()).num_steps == 3
  assert unset[key] != props[key]  # The caller's dict is left as it was.
  given = {key: proto_utils.proto_to_json(trainer_pb2.EvalArgs(num_steps=7))}
  assert steps_lib.with_eval_steps(given, examples, 64) == (given, None)


def test_profile_range_beyond_the_run_is_refused_in_one_line():
  trainer_api.check_profile_steps((100, 110), 600)
  with pytest.raises(UserInputError) as error:
    trainer_api.check_profile_steps((590, 610), 600)
  assert str(error.value) == (
    "--profile-steps 590,610 ends after the last training step of this run (600); pass a range "
    "between 1 and 600 or raise --train-steps."
  )
  with pytest.raises(UserInputError, match="not a range"):
    trainer_api.check_profile_steps((0, 3), 600)


def test_a_range_that_training_stopped_before_is_named_with_the_step_it_stopped_at():
  assert steps_lib.profile_not_reached((2000, 2010), 1617, 77, 200) == (
    "--profile-steps 2000,2010 was never reached: early stopping ended training at step 1617 "
    "(epoch 77 of 200); pass a range between 1 and 1617 to profile this run."
  )
  assert steps_lib.profile_not_reached((1617, 2010), 1617, 77, 200) is None  # reached
  assert steps_lib.profile_not_reached(None, 1617, 77, 200) is None


@pytest.mark.parametrize(
  ("steps", "per_epoch", "per_call", "calls"),
  [
    ((100, 110), 120, 10, (10, 11)),  # Steps 91-100 run in call 10, 101-110 in call 11.
    ((1, 1), 120, 10, (1, 1)),
    ((121, 125), 120, 10, (13, 13)),  # First call of the second epoch.
    ((120, 121), 125, 10, (12, 13)),  # 125 steps: calls 1-13 in epoch 1, the last one short.
    ((126, 126), 125, 10, (14, 14)),
    ((5, 9), 100, 1, (5, 9)),
  ],
)
def test_profiled_steps_map_onto_keras_batch_hook_calls(steps, per_epoch, per_call, calls):
  assert steps_lib.profile_calls(steps, per_epoch, per_call) == calls
