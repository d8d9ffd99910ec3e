"""The one-line outcome of each component in the run summary (pipeline/cli/summary.py)."""

from ml_metadata.proto import metadata_store_pb2

from core import properties
from pipeline.cli import summary


def _examples(**props) -> metadata_store_pb2.Artifact:
  artifact = metadata_store_pb2.Artifact()
  for key, value in props.items():
    target = artifact.custom_properties[key]
    if isinstance(value, int):
      target.int_value = value
    else:
      target.string_value = value
  return artifact


def test_the_examples_line_counts_rows_left_out_and_names_a_text_labels_tokens():
  rows = {"num_rows_train": 262, "num_rows_eval": 71}
  clean = _examples(**rows, num_bad_rows=0)
  assert summary._examples_line(clean) == "262 train / 71 eval rows"
  empty = _examples(**rows, num_bad_rows=13, num_unlabeled_rows=11)
  assert summary._examples_line(empty) == (
    "262 train / 71 eval rows, 11 without a label and 2 bad left out"
  )
  tokens = _examples(
    **rows,
    num_bad_rows=11,
    num_unlabeled_rows=11,
    **{properties.EXAMPLES_UNLABELED_TOKENS: '{"NA": 11}'},
  )
  assert summary._examples_line(tokens) == (
    "262 train / 71 eval rows, 11 without a label left out "
    "(label NA in 11 rows; --task multiclass learns it as a class)"
  )
