"""Helpers for ExampleGen tests: run an executor on a folder and read its output back."""

from __future__ import annotations

import glob
import os
import re
import struct

import tensorflow as tf
from tfx.components.example_gen import utils
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs as specs
from tfx.utils import proto_utils


def exec_properties(input_base, pattern="*", buckets=(2, 1), **extra):
  input_config = example_gen_pb2.Input(
    splits=[example_gen_pb2.Input.Split(name="single_split", pattern=pattern)]
  )
  output_config = example_gen_pb2.Output(
    split_config=example_gen_pb2.SplitConfig(
      splits=[
        example_gen_pb2.SplitConfig.Split(name=n, hash_buckets=b)
        for n, b in zip(("train", "eval"), buckets, strict=True)
      ]
    )
  )
  props = {
    specs.INPUT_BASE_KEY: str(input_base),
    specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(input_config),
    specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(output_config),
    specs.OUTPUT_DATA_FORMAT_KEY: example_gen_pb2.FORMAT_TF_EXAMPLE,
    specs.OUTPUT_FILE_FORMAT_KEY: example_gen_pb2.FORMAT_TFRECORDS_GZIP,
    utils.SPAN_PROPERTY_NAME: 0,
  }
  props.update(extra)
  return props


def run_executor(executor_cls, props, out_dir):
  examples = standard_artifacts.Examples()
  examples.uri = str(out_dir)
  executor_cls().Do({}, {specs.EXAMPLES_KEY: [examples]}, props)
  return examples


def read_records(uri, split=None):
  """Returns the serialized records under uri (one split or all)."""
  pattern = os.path.join(str(uri), f"Split-{split}" if split else "Split-*", "*.gz")
  records = []
  for path in sorted(glob.glob(pattern)):
    records.extend(r.numpy() for r in tf.data.TFRecordDataset(path, compression_type="GZIP"))
  return records


def read_examples(uri, split=None):
  """Returns the examples under uri (one split or all) as a list of feature dicts."""
  rows = []
  for record in read_records(uri, split):
    ex = tf.train.Example.FromString(record)
    row = {}
    for k, f in ex.features.feature.items():
      kind = f.WhichOneof("kind")
      row[k] = tuple(getattr(f, kind).value) if kind else ()
    rows.append(row)
  return rows


def canonical_example(record: bytes) -> tuple:
  """A hashable, exact form of a serialized tf.Example: feature kinds and value bits.

  Floats are compared by their float32 bits, so NaN equals NaN and -0.0 differs
  from 0.0; a feature with no kind set differs from a typed empty list.
  """
  ex = tf.train.Example.FromString(record)
  out = []
  for name, feature in ex.features.feature.items():
    kind = feature.WhichOneof("kind")
    values = tuple(getattr(feature, kind).value) if kind else ()
    if kind == "float_list":
      values = tuple(struct.pack("<f", v) for v in values)
    out.append((name, kind, values))
  return tuple(sorted(out))


# Cells of the messy CSV's "oddint" column: Python's int() reads them all, Arrow not all.
ODD_INTS = [" 12", "+5", "1_000", "007", "-0", "\t8 ", "42"]
# Cells of the "oddfloat" column: float() reads them all; some are ints, one has underscores.
ODD_FLOATS = ["1e5", "+nan", "-nan", "inf", "-Infinity", "2.5", "3", "1_000.5", " .5", "-1e-3"]
BEYOND_INT64 = "9223372036854775808"
LATE_LINE = 15_003


def write_messy_csv(path, rows: int = 16_000) -> None:
  """Writes a CSV that trips naive type inference and naive parsing, for parity tests.

  Columns: a 12-digit integer id; an int column with one integer beyond int64
  (a string column for stock); a column empty until line 15,003 and then
  holding 11-digit integers; mixed ints and floats; a column empty in every
  row; text with quoted commas, quotes and embedded newlines (and empty
  cells); a sparse int column; integers only Python reads (' 12', '+5',
  '1_000'); floats only Python reads, with NaN and infinities; and a label.
  Blank lines are sprinkled in.
  """
  lines = ["id,bigint,late,mixed,allempty,text,sparse,oddint,oddfloat,label"]
  for i in range(rows):
    line_number = len(lines) + 1
    late = str(17031081401 + line_number - LATE_LINE) if line_number >= LATE_LINE else ""
    bigint = BEYOND_INT64 if i == rows // 2 else str(i * 7)
    mixed = f"{i / 8}" if i % 5 == 0 else str(i)
    text = [
      "plain",
      '"a, b"',
      '"say ""hi"""',
      '"multi\nline"',
      "",
      "12",
      '"ends with\r\nCRLF"',
      " spaced ",
    ][i % 8]
    sparse = "" if i % 3 else str(i % 11)
    cells = [
      str(100_000_000_000 + i),
      bigint,
      late,
      mixed,
      "",
      text,
      sparse,
      ODD_INTS[i % len(ODD_INTS)],
      ODD_FLOATS[i % len(ODD_FLOATS)],
      str(i % 4),
    ]
    lines.append(",".join(cells))
    if i % 997 == 0:
      lines.append("")
  with open(path, "w", newline="") as f:
    f.write("\n".join(lines) + "\n")


# Every reason the ExampleGen may give for a quarantined row.
REASON = re.compile(
  r"expected \d+ fields, found \d+|is not an integer|is not a number|NaN or infinity"
  r"|bytes are not valid UTF-8|missing label|expected an empty cell|repeats the header row"
)

# Nasty rows from the generator's alphabet, each quarantined whatever the column types, so
# that the digits columns keep their types (a stray 'nan' or 'abc' cell would make its whole
# column a float or string column, as in stock CsvExampleGen): ragged rows (one with a quoted
# line break, one with NaN and infinities, one huge), undecodable bytes (in a ragged row too)
# and an empty label.
NASTY_ROWS = (
  b"nan" + b",1e999" * 65 + b"\n"
  + b"1,2,3\n"
  + b'"7\n8"' + b",2" * 65 + b"\n"
  + b"\xc3" + b",\xda" * 64 + b"\n"
  + b"\xc3,\xda,\xff\n"
  + b"0," * 64 + b"\n"
  + b"9" * 200_000 + b",3" * 65 + b"\r\n"
)  # fmt: skip
