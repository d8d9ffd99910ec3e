"""The one-line outcome of each component in the run summary (pipeline/cli/summary.py)."""

import pathlib

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


def test_eval_rows_of_a_class_the_train_split_lacks_are_counted_by_class():
  """4 penguins of 'Unknown', all in the eval split: the model had 3 classes, the summary said
  4 values, and the 4 rows were scored as wrong without a word."""
  import json

  stats = {
    "train": {"rows": 281, "counts": {"Adelie": 120, "Gentoo": 100, "Chinstrap": 61}},
    "eval": {"rows": 63, "counts": {"Adelie": 30, "Gentoo": 20, "Unknown": 4, "NA": 2, "": 7}},
  }
  examples = _examples(**{properties.EXAMPLES_LABEL_STATS: json.dumps(stats)})
  classes = {"task": "multiclass", "label_classes": ["Adelie", "Chinstrap", "Gentoo"]}
  assert summary._eval_only_classes(examples, classes) == {"Unknown": 4}
  assert summary._eval_only_classes(examples, {**classes, "task": "regression"}) == {}
  assert summary._eval_only_classes(None, classes) == {}
  from pipeline.cli import progress

  shown = {"status": "succeeded", "seconds": 1.0, "eval_only_classes": {"Unknown": 4}}
  lines = progress.describe_summary(shown, pathlib.Path("out"), "out/logs/run.log")
  assert (
    "eval rows of classes the train split lacks: 4 of 'Unknown'; the model has no such class, so "
    "they count as wrong."
  ) in lines


def test_a_reused_gate_gives_the_nights_gate_facts_from_its_result_artifact(tmp_path):
  # A night that pushed on the cached gate of a night that failed later (its trainer ran out of
  # disk) was recorded with no gate, though its run page showed the gate it passed.
  import json as json_lib

  from core import properties, sources
  from pipeline.cli import summary as summary_lib

  gate = tmp_path / "gate"
  gate.mkdir()
  report = {"passed": True, "compared": True, "live_version": 1, "drift": {}, "findings": []}
  (gate / properties.GATE_REPORT_FILE).write_text(json_lib.dumps(report))
  examples = {
    properties.EXAMPLES_SPANS: "[2]",
    properties.examples_rows(properties.TRAIN_SPLIT): 2369,
    properties.examples_rows(properties.EVAL_SPLIT): 631,
  }
  summary = {
    sources.ARTIFACTS: {
      sources.GATE: {"uri": str(gate), "properties": {}},
      sources.EXAMPLES: {"uri": str(tmp_path / "examples"), "properties": examples},
    }
  }
  assert summary_lib.reused_gate_facts(summary) == {
    "report": report,
    "live_version": 1,
    "spans": [2],
    "rows": {properties.TRAIN_SPLIT: 2369, properties.EVAL_SPLIT: 631},
  }
  (gate / properties.GATE_REPORT_FILE).unlink()
  assert summary_lib.reused_gate_facts(summary) is None
  assert summary_lib.reused_gate_facts({}) is None
