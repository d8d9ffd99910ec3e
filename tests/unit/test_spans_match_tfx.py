"""core.spans picks the span TFX's ExampleGen driver picks, on the same files: the command line's
checks read the files the run will read."""

import os

import pytest

from core import spans

LAYOUTS = {
  "numbers": (["span-1/a.csv", "span-2/a.csv", "span-10/a.csv", "span-10/b.csv"], "span-{SPAN}/*"),
  "padded": (["span-007/a.csv", "span-010/a.csv"], "span-{SPAN}/*.csv"),
  "width": (["span-007/a.csv", "span-010/a.csv"], "span-{SPAN:3}/*.csv"),
  "versions": (
    ["span-1/v9/a.csv", "span-2/v1/a.csv", "span-2/v3/a.csv", "span-2/v2/a.csv"],
    "span-{SPAN}/v{VERSION}/*.csv",
  ),
  "dates": (["2024-01-31/a.csv", "2024-02-01/a.csv", "2023-12-31/a.csv"], "{YYYY}-{MM}-{DD}/*"),
  "files": (["data-1.csv", "data-12.csv", "data-3.csv"], "data-{SPAN}.csv"),
  "no_match": (["other/a.csv"], "span-{SPAN}/*.csv"),
  "not_a_number": (["span-1/a.csv", "span-old/a.csv"], "span-{SPAN}/*.csv"),
}


def _tfx(base: str, pattern: str):
  """(span, version, resolved pattern) by TFX's driver code, or the ValueError it raises."""
  from tfx.components.example_gen import utils
  from tfx.proto import example_gen_pb2

  split = example_gen_pb2.Input.Split(name="single_split", pattern=pattern)
  try:
    _, span, version = utils.calculate_splits_fingerprint_span_and_version(base, [split])
  except ValueError as e:
    return type(e)
  return span, version, os.path.join(base, split.pattern)


def _ours(base: str, pattern: str):
  from components.example_gen import io_lib

  full = os.path.join(base, pattern)
  try:
    found = spans.newest(full, io_lib.glob(spans.matching(full)[0]))
  except ValueError as e:
    return type(e)
  if found is None:
    return ValueError  # TFX: 'Cannot find matching for split ...'
  return found.span, found.version, found.pattern


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_newest_span_is_tfx_drivers(tmp_path, layout):
  files, pattern = LAYOUTS[layout]
  for name in files:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text("x\n1\n")
  assert _ours(str(tmp_path), pattern) == _tfx(str(tmp_path), pattern)
