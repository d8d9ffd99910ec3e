"""ExampleGen libraries on their own: type rules, parsing, profiling, planning and merging."""

from __future__ import annotations

import csv
import gzip
import json
import os
import pathlib
import random

import numpy as np
import pyarrow as pa
import pytest
import tensorflow as tf
from tfx_bsl.coders import csv_decoder

from components.example_gen import (
  csv_batch,
  csv_convert,
  csv_errors,
  csv_infer,
  csv_profile,
  csv_read,
  csv_split,
  example_gen_lib,
  io_lib,
  merge_lib,
)
from core import column_types, missing_values
from tests.support.example_gen_runs import BEYOND_INT64, LATE_LINE, write_messy_csv

_STOCK_KIND = {
  csv_decoder.ColumnType.UNKNOWN: column_types.CSV_UNKNOWN,
  csv_decoder.ColumnType.INT: column_types.CSV_INT,
  csv_decoder.ColumnType.FLOAT: column_types.CSV_FLOAT,
  csv_decoder.ColumnType.STRING: column_types.CSV_STRING,
}
_RANK = [
  column_types.CSV_UNKNOWN,
  column_types.CSV_INT,
  column_types.CSV_FLOAT,
  column_types.CSV_STRING,
]
EDGE_CELLS = [
  "12", " 12", "12 ", "\t8\n", "+5", "-5", "-0", "007", "1_000", "1__0", "_1", "1e5", "1E3",
  "1e+5", "1e-5", "1.5e3", "1.5", ".5", "5.", ".", "1e", "e5", "nan", "NaN", "-nan", "+nan",
  "nan(1)", "inf", "-inf", "+inf", "Infinity", "inFinity", "0x10", "0X1f", "0b1", "0o7",
  "1.5_0", "1,5", "1.2.3", "+", "-", "9223372036854775807", "-9223372036854775808",
  BEYOND_INT64, "-9223372036854775809", "99999999999999999999", "0" * 30 + "5", "9" * 5000,
  "0" * 4400 + "1", "1e999", "3.4028236e38", "abc", "true", "\u0661", "1\x00",
]  # fmt: skip


def _stock_kind(cell: str) -> str:
  return _STOCK_KIND[csv_decoder._InferValueType(cell.encode())]


def _column_kind(cell: str) -> str:
  """A cell's part in its column's type: stock's, except that missing tokens are empty cells."""
  return (
    column_types.CSV_UNKNOWN if cell.strip() in missing_values.MISSING_TOKENS else _stock_kind(cell)
  )


def _write(path, text: str | bytes, compress: bool = False):
  data = text.encode() if isinstance(text, str) else text
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(gzip.compress(data) if compress else data)
  return str(path)


def _column_csv(tmp_path, cells, name="c.csv"):
  body = "".join(f'"{c}",1\n' if c else ",1\n" for c in cells)
  return _write(tmp_path / name, "c,other\n" + body)


class TestTypeRules:
  @pytest.mark.parametrize("cell", EDGE_CELLS)
  def test_one_cell_is_typed_as_stock_types_it(self, cell):
    assert csv_infer.infer_value_kind(cell.encode()) == _stock_kind(cell)

  @pytest.mark.parametrize("cell", EDGE_CELLS)
  def test_a_column_of_one_edge_cell_among_ints_is_typed_as_stock(self, tmp_path, cell):
    """The Arrow fast path must never disagree with Python on any of these."""
    cells = ["1", "22", "-3", cell, "4"]
    expected = max((_column_kind(c) for c in cells), key=_RANK.index)
    assert csv_infer.infer_column_types([_column_csv(tmp_path, cells)])["c"] == expected
    alone = csv_infer.infer_column_types([_column_csv(tmp_path, [cell, cell], "alone.csv")])
    assert alone["c"] == _column_kind(cell)

  def test_random_columns_are_typed_as_stock(self, tmp_path):
    rng = random.Random(3)
    alphabet = "0123456789+-.eExXnaifINFty_ ("
    for trial in range(200):
      cells = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        for _ in range(rng.randint(1, 8))
      ]
      cells = [c.strip() and c for c in cells]  # Whitespace-only cells: see the edge list.
      expected = max((_column_kind(c) for c in cells), key=_RANK.index)
      path = _column_csv(tmp_path, cells, f"r{trial}.csv")
      assert csv_infer.infer_column_types([path])["c"] == expected, cells

  def test_whole_input_counts_not_a_sample(self, tmp_path):
    path = tmp_path / "m.csv"
    write_messy_csv(path)
    types = csv_infer.infer_column_types([str(path)])
    assert types == {
      "id": "int",
      "bigint": "string",
      "late": "int",
      "mixed": "float",
      "allempty": "unknown",
      "text": "string",
      "sparse": "int",
      "oddint": "int",
      "oddfloat": "float",
      "label": "int",
    }
    assert LATE_LINE > 15_000

  def test_a_stray_string_in_a_later_file_makes_a_string_column(self, tmp_path):
    a = _write(tmp_path / "a.csv", "x,y\n" + "1,2\n" * 100)
    b = _write(tmp_path / "b.csv", "x,y\n" + "1,2\n" * 100 + "oops,3\n")
    assert csv_infer.infer_column_types([a, b]) == {"x": "string", "y": "int"}

  def test_rows_quarantined_anyway_do_not_count(self, tmp_path):
    data = b"x,y,label\n1,2,1\n3,4,0\nabc,5,\n\xff,x,1\n7,8,9,10\n"
    path = _write(tmp_path / "a.csv", data)
    types = csv_infer.infer_column_types([path], label_key="label")
    assert types == {"x": "int", "y": "int", "label": "int"}
    assert csv_infer.infer_column_types([path])["x"] == "string"  # No label: the row counts.

  def test_the_header_written_again_does_not_count(self, tmp_path):
    # `cat a.csv b.csv`: b's header is a row of a.csv's columns' names.
    path = _write(tmp_path / "a.csv", "x,y,label\n1,2.5,a\nx,y,label\n3,4.5,b\n")
    assert csv_infer.infer_column_types([path]) == {"x": "int", "y": "float", "label": "string"}
    # One cell holding its column's name is data.
    named = _write(tmp_path / "b.csv", "x,y,label\n1,2.5,a\nx,7,b\n")
    assert csv_infer.infer_column_types([named])["x"] == "string"

  @pytest.mark.parametrize("token", missing_values.MISSING_TOKENS)
  def test_a_missing_token_among_numbers_is_an_empty_cell(self, tmp_path, token):
    path = _column_csv(tmp_path, ["1.5", token, f" {token} ", "", "2"])
    assert csv_infer.infer_column_types([path])["c"] == "float"
    alone = _column_csv(tmp_path, [token, token], "alone.csv")
    assert csv_infer.infer_column_types([alone])["c"] == "unknown"

  def test_missing_tokens_stay_text_in_a_text_column(self, tmp_path):
    path = _column_csv(tmp_path, ["NA", "Namibia", "?", "-"])
    assert csv_infer.infer_column_types([path])["c"] == "string"
    # Close to a token is not one: stock's rules apply.
    for cell in ["NaNa", "N.A.", "na", "none", "--"]:
      both = _column_csv(tmp_path, ["1", cell], f"{cell}.csv")
      assert csv_infer.infer_column_types([both])["c"] == _stock_kind(cell), cell

  def test_types_from_schema(self, tmp_path):
    schema = tmp_path / "s.pbtxt"
    schema.write_text('feature { name: "a" type: INT }\nfeature { name: "b" type: BYTES }\n')
    assert csv_infer.types_from_schema(str(schema)) == {"a": "int", "b": "string"}


def _raw_batch(**columns) -> pa.RecordBatch:
  return pa.RecordBatch.from_arrays(
    [
      pa.array([None if v == "" else v.encode() for v in vs], pa.binary())
      for vs in columns.values()
    ],
    names=list(columns),
  )


class TestConvertBatch:
  def test_values_equal_python_int_and_float_of_the_cell(self):
    ints = ["1", " 12", "+5", "1_000", "007", "-9223372036854775808", "", "42"]
    floats = ["1e5", "2.5", " .5", "1_000.5", "-1e-3", "3", "", "0.1"]
    raw = _raw_batch(i=ints, f=floats)
    options = csv_batch.ConvertOptions(column_types={"i": "int", "f": "float"})
    verdict = csv_batch.convert_batch(raw, options)
    assert verdict.bad_index.tolist() == []
    examples = [tf.train.Example.FromString(r) for r in verdict.serialize().to_pylist()]
    got_i = [list(e.features.feature["i"].int64_list.value) for e in examples]
    got_f = [list(e.features.feature["f"].float_list.value) for e in examples]
    assert got_i == [[int(c)] if c else [] for c in ints]
    assert got_f == [[float(np.float32(float(c)))] if c else [] for c in floats]

  def test_cells_python_rejects_are_bad_under_a_schema(self):
    raw = _raw_batch(i=["0x10", BEYOND_INT64, "1", "9" * 5000], f=["nan(1)", "1", "x", "2"])
    options = csv_batch.ConvertOptions(column_types={"i": "int", "f": "float"})
    verdict = csv_batch.convert_batch(raw, options)
    assert verdict.bad_index.tolist() == [0, 1, 2, 3]
    assert "'0x10' is not an integer" in verdict.bad_reason[0]
    assert "is not an integer" in verdict.bad_reason[1]
    assert "'x' is not a number" in verdict.bad_reason[2]
    assert verdict.bad_reason[3].endswith("...' is not an integer")  # Long cells are cut.

  def test_missing_tokens_in_numeric_columns_are_empty_lists(self):
    raw = _raw_batch(
      i=["1", "NA", "?", "3"], f=["2.5", "N/A", " - ", "."], u=["NA", "", "null", "#N/A"],
      s=["NA", "a", "?", "b"], label=["0", "1", "1", "0"],
    )  # fmt: skip
    types = {"i": "int", "f": "float", "u": "unknown", "s": "string", "label": "int"}
    options = csv_batch.ConvertOptions(column_types=types, label_key="label")
    verdict = csv_batch.convert_batch(raw, options)
    assert verdict.bad_index.tolist() == []
    records = verdict.serialize().to_pylist()
    features = [tf.train.Example.FromString(r).features.feature for r in records]
    assert [list(x["i"].int64_list.value) for x in features] == [[1], [], [], [3]]
    assert [list(x["f"].float_list.value) for x in features] == [[2.5], [], [], []]
    assert [x["u"].WhichOneof("kind") for x in features] == [None] * 4
    assert [list(x["s"].bytes_list.value) for x in features] == [[b"NA"], [b"a"], [b"?"], [b"b"]]

  def test_a_numeric_label_written_as_a_missing_token_is_a_missing_label(self):
    raw = _raw_batch(x=["1", "2", "3"], y=["1.5", "NA", "2"])
    options = csv_batch.ConvertOptions(column_types={"x": "int", "y": "float"}, label_key="y")
    verdict = csv_batch.convert_batch(raw, options)
    assert verdict.bad_index.tolist() == [1]
    assert verdict.bad_reason == ["missing label 'y'"]

  def test_a_text_label_written_as_a_missing_token_is_a_missing_label(self):
    # penguins' `sex`: NA is no third sex; a text feature keeps its NA cells (the test above).
    raw = _raw_batch(x=["1", "2", "3", "4"], sex=["male", "NA", "female", " ? "])
    options = csv_batch.ConvertOptions(column_types={"x": "int", "sex": "string"}, label_key="sex")
    verdict = csv_batch.convert_batch(raw, options)
    assert verdict.bad_index.tolist() == [1, 3]
    assert verdict.bad_reason == [
      "missing label 'sex', written as NA",
      "missing label 'sex', written as ?",
    ]
    assert all(csv_batch.is_missing_label(r) for r in verdict.bad_reason)
    assert [csv_batch.missing_label_token(r) for r in verdict.bad_reason] == ["NA", "?"]
    # An empty label, and a cell that merely ends like a token's reason, name no token.
    assert csv_batch.missing_label_token("missing label 'sex'") is None
    assert csv_batch.missing_label_token("column 'x': 'written as NA' is not a number") is None

  def test_multiclass_keeps_a_text_labels_missing_tokens_as_classes(self):
    # MASS's survey writes 'None' for no exercise: with --task multiclass it is a class.
    raw = _raw_batch(x=["1", "2", "3", ""], exer=["Some", "None", "Freq", ""])
    options = csv_batch.ConvertOptions(
      column_types={"x": "int", "exer": "string"}, label_key="exer", keep_label_tokens=True
    )
    verdict = csv_batch.convert_batch(raw, options)
    assert verdict.bad_index.tolist() == [3]  # An empty label is still no label.
    assert verdict.bad_reason == ["missing label 'exer'"]
    records = verdict.serialize().to_pylist()
    labels = [tf.train.Example.FromString(r).features.feature["exer"] for r in records]
    assert [list(f.bytes_list.value) for f in labels] == [[b"Some"], [b"None"], [b"Freq"]]

  def test_bad_cells_of_a_lenient_column_are_written_empty_and_keep_their_rows(self):
    # drc's germination writes end=Inf for seeds that never germinated; a column the model
    # leaves out (--exclude-columns) must not cost the rows the model reads.
    raw = _raw_batch(
      end=["3.5", "Inf", "NaN", "2"],
      code=["7", "7x", "8", ""],
      blank=["", "", "late", ""],
      label=["1", "0", "1", "0"],
    )
    types = {"end": "float", "code": "int", "blank": "unknown", "label": "int"}
    strict = csv_batch.convert_batch(raw, csv_batch.ConvertOptions(types, label_key="label"))
    assert strict.bad_index.tolist() == [1, 2]
    lenient = csv_batch.ConvertOptions(
      types, label_key="label", lenient_columns=frozenset({"end", "code", "blank"})
    )
    verdict = csv_batch.convert_batch(raw, lenient)
    assert verdict.num_kept == 4 and verdict.bad_index.tolist() == []
    examples = [tf.train.Example.FromString(r) for r in verdict.serialize().to_pylist()]
    ends = [list(e.features.feature["end"].float_list.value) for e in examples]
    assert ends == [[3.5], [], [], [2.0]]
    codes = [list(e.features.feature["code"].int64_list.value) for e in examples]
    assert codes == [[7], [], [8], []]
    assert [list(e.features.feature["label"].int64_list.value) for e in examples] == [
      [1],
      [0],
      [1],
      [0],
    ]

  def test_nan_written_for_a_gap_is_an_empty_cell_and_a_missing_label(self):
    # pandas writes a float column's gaps as NaN with na_rep="NaN" (str() of a float: nan,
    # of a nullable column: <NA>), and R writes 0/0 as NaN: gaps, not bad rows. Infinity is not.
    raw = _raw_batch(x=["1.5", "nan", " NaN ", "<NA>", "inf"], y=["1", "2", "NaN", "3", "4"])
    options = csv_batch.ConvertOptions({"x": "float", "y": "float"}, label_key="y")
    verdict = csv_batch.convert_batch(raw, options)
    assert verdict.bad_index.tolist() == [2, 4]
    assert verdict.bad_reason == ["missing label 'y'", "column 'x': NaN or infinity"]
    examples = [tf.train.Example.FromString(r) for r in verdict.serialize().to_pylist()]
    assert [list(e.features.feature["x"].float_list.value) for e in examples] == [[1.5], [], []]

  def test_a_bad_rows_reason_names_its_column(self):
    assert csv_batch.bad_column("column 'end': NaN or infinity") == "end"
    assert csv_batch.bad_column("column \"it's\": 'x' is not a number") == "it's"
    assert csv_batch.bad_column("column 'a: b': bytes are not valid UTF-8") == "a: b"
    assert csv_batch.bad_column("expected 3 fields, found 4") is None
    assert csv_batch.bad_column("missing label 'label'") is None

  def test_the_note_on_label_tokens_names_each_token_and_the_flag(self):
    assert missing_values.label_tokens_note({}) == ""
    assert missing_values.label_tokens_note({"None": 24}) == (
      "label None in 24 rows; --task multiclass learns it as a class"
    )
    assert missing_values.label_tokens_note({"?": 1, "NA": 1200}) == (
      "label ? in 1 row, NA in 1,200 rows; --task multiclass learns them as classes"
    )

  def test_empty_cells_are_empty_lists_and_unknown_columns_have_no_kind(self):
    raw = _raw_batch(i=["1", ""], s=["", "a"], u=["", ""])
    options = csv_batch.ConvertOptions(column_types={"i": "int", "s": "string", "u": "unknown"})
    records = csv_batch.convert_batch(raw, options).serialize().to_pylist()
    features = [tf.train.Example.FromString(r).features.feature for r in records]
    kinds = [{k: f.WhichOneof("kind") for k, f in x.items()} for x in features]
    assert kinds == [{"i": "int64_list", "s": "bytes_list", "u": None}] * 2
    assert [list(x["i"].int64_list.value) for x in features] == [[1], []]
    assert [list(x["s"].bytes_list.value) for x in features] == [[], [b"a"]]


class TestReading:
  def test_header_of_a_gzipped_file(self, tmp_path):
    path = _write(tmp_path / "d", "a,b\n1,2\n", compress=True)
    assert csv_read.read_header(path) == ["a", "b"]
    assert io_lib.is_gzip(path)

  def test_rows_longer_than_the_block_grow_it(self, tmp_path):
    rows = [f"{i},{'x' * (3000 if i in (5, 40) else 2)}\n" for i in range(60)]
    path = _write(tmp_path / "a.csv", "n,s\n" + "".join(rows))
    batches = list(csv_read.iter_raw_batches(csv_read.Chunk(path), ["n", "s"], block_size=1024))
    numbers = [int(v) for b in batches for v in b.column("n").to_pylist()]
    assert numbers == list(range(60))

  def test_gzipped_files_are_never_cut(self, tmp_path):
    path = _write(tmp_path / "a.csv.gz", "a\n" + "1\n" * 50_000, compress=True)
    assert csv_read.plan_chunks(path, 1024) == [csv_read.Chunk(path)]

  @pytest.mark.parametrize(
    "header, delimiter, expected",
    [
      ("a;b;label", ",", "pass --delimiter ';'"),
      ("a\tb", ",", "pass --delimiter '\\t'"),
      ("a|b", ",", "pass --delimiter '|'"),
      ("a,b", ";", "pass --delimiter ','"),
      ("a b", ",", ""),
    ],
  )
  def test_delimiter_hint(self, header, delimiter, expected):
    hint = csv_errors.delimiter_hint([header], delimiter)
    assert expected in hint if expected else hint == ""
    assert csv_errors.delimiter_hint(["a", "b;c"], ",") == ""


class TestProfileColumn:
  def test_binary_int_label(self, tmp_path):
    a = _write(tmp_path / "a.csv", "x,label\n" + "".join(f"{i},{i % 2}\n" for i in range(100)))
    b = _write(tmp_path / "b.csv", "x,label\n1,\n2, 1\n", compress=True)
    p = csv_profile.profile_column([a, b], "label")
    assert p == csv_profile.ColumnProfile(
      "label", "int", 102, 1, (0, 1), False, 2, {0: 50, 1: 51}, 51 / 101, p.variance
    )
    assert p.variance == pytest.approx(np.var([0] * 50 + [1] * 51))

  def test_string_label_keeps_the_cells(self, tmp_path):
    path = _write(tmp_path / "a.csv", 'x;label\n1;"b;c"\n2;a\n3;b\n4;a\n')
    p = csv_profile.profile_column([path], "label", delimiter=";")
    assert (p.kind, p.values, p.num_rows) == ("string", ("a", "b", "b;c"), 4)
    assert p.value_counts == {"a": 2, "b": 1, "b;c": 1}
    assert p.mean is None and p.variance is None

  def test_float_label_by_the_whole_input(self, tmp_path):
    rows = "".join(f"{i},{i}\n" for i in range(20_000)) + "1,2.5\n"
    p = csv_profile.profile_column(
      [_write(tmp_path / "a.csv", "x,y\n" + rows)], "y", max_distinct=10
    )
    assert p.kind == "float"
    assert p.truncated and p.values == () and p.distinct_count_at_least > 10
    assert p.value_counts is None
    values = np.array([*range(20_000), 2.5])
    assert p.mean == pytest.approx(values.mean())
    assert p.variance == pytest.approx(values.var())

  def test_empty_column(self, tmp_path):
    p = csv_profile.profile_column([_write(tmp_path / "a.csv", "x,y\n1,\n2,\n")], "y")
    assert p == csv_profile.ColumnProfile("y", None, 2, 2, (), False, 0, {})

  def test_same_number_written_twice_counts_once(self, tmp_path):
    path = _write(tmp_path / "a.csv", "x,y\n1,1\n2,01\n3, 1\n4,2.0\n5,-nan\n")
    p = csv_profile.profile_column([path], "y")
    assert (p.kind, p.values, p.value_counts) == ("float", (1.0, 2.0), {1.0: 3, 2.0: 1})
    assert p.num_rows == 5 and p.mean == pytest.approx(1.25)  # NaN left out.

  def test_missing_tokens_of_a_numeric_label_count_as_empty(self, tmp_path):
    path = _write(tmp_path / "a.csv", "x,y\n1,1\n2,NA\n3,2\n4,?\n5,1\n")
    p = csv_profile.profile_column([path], "y")
    assert (p.kind, p.values, p.value_counts) == ("int", (1, 2), {1: 2, 2: 1})
    assert (p.num_rows, p.num_empty) == (5, 2)
    many = "".join(f"{i},{i}\n" for i in range(50)) + "9,NA\n"
    truncated = csv_profile.profile_column(
      [_write(tmp_path / "b.csv", "x,y\n" + many)], "y", max_distinct=10
    )
    assert truncated.kind == "int" and truncated.distinct_count_at_least == 50

  def test_missing_tokens_of_a_text_label_count_as_empty(self, tmp_path):
    path = _write(tmp_path / "a.csv", "x,sex\n1,male\n2,NA\n3,female\n4,male\n5,N/A\n")
    p = csv_profile.profile_column([path], "sex")
    assert (p.kind, p.values, p.value_counts) == (
      "string",
      ("female", "male"),
      {"female": 1, "male": 2},
    )
    assert (p.num_rows, p.num_empty) == (5, 2)
    kept = csv_profile.profile_column([path], "sex", keep_text_tokens=True)
    assert (kept.values, kept.value_counts, kept.num_empty) == (
      ("N/A", "NA", "female", "male"),
      {"N/A": 1, "NA": 1, "female": 1, "male": 2},
      0,
    )
    # A number label's tokens stay empty cells whatever the task.
    numbers = _write(tmp_path / "b.csv", "x,y\n1,1\n2,NA\n3,2\n")
    assert csv_profile.profile_column([numbers], "y", keep_text_tokens=True).num_empty == 1

  def test_the_header_written_again_is_not_a_value(self, tmp_path):
    path = _write(tmp_path / "a.csv", "x,churn\n1,yes\n2,no\nx,churn\n3,no\n")
    p = csv_profile.profile_column([path], "churn")
    assert p.values == ("no", "yes") and p.num_rows == 3
    # A label cell that holds the column's name, in a row that is not the header, counts.
    named = _write(tmp_path / "b.csv", "x,churn\n1,yes\n2,churn\n")
    assert csv_profile.profile_column([named], "churn").values == ("churn", "yes")

  def test_ragged_rows_do_not_count(self, tmp_path):
    path = _write(tmp_path / "a.csv", "x,y\n1,2\n3\n4,5,6\n7,8\n")
    assert csv_profile.profile_column([path], "y").num_rows == 2

  def test_a_header_shorter_than_every_row_is_named(self, tmp_path):
    """scikit-learn's wine_data.csv starts with a line of counts and class names."""
    rows = "".join(
      f"{i}.5,1.7,2.4,15,127,2.8,3.1,.28,2.3,5.6,1.0,3.9,1065,{i % 3}\n" for i in range(9)
    )
    path = _write(tmp_path / "wine.csv", "178,13,class_0,class_1,class_2\n" + rows)
    with pytest.raises(
      csv_errors.CsvInputError,
      match=r"wine.csv have a different number of fields than its header \(5\): most have 14",
    ):
      csv_profile.profile_column([path], "class_2")

  def test_missing_column_suggests_the_delimiter(self, tmp_path):
    path = _write(tmp_path / "a.csv", "x;label\n1;2\n")
    with pytest.raises(csv_errors.CsvInputError, match="pass --delimiter ';'"):
      csv_profile.profile_column([path], "label")
    with pytest.raises(csv_errors.CsvInputError, match="no CSV files"):
      csv_profile.profile_column([], "label")

  def test_reads_only_the_column_quickly(self, tmp_path):
    rows = "".join(f"{i},{i * 3},{'z' * 20},{i % 3}\n" for i in range(100_000))
    path = _write(tmp_path / "a.csv", "a,b,c,label\n" + rows)
    p = csv_profile.profile_column([path], "label")
    assert p.values == (0, 1, 2) and p.num_rows == 100_000


class TestIo:
  def test_gzip_tfrecords_read_back_with_tensorflow(self, tmp_path):
    path = str(tmp_path / "out" / "x.gz")
    writer = io_lib.GzipTFRecordWriter(path)
    records = [b"", b"a", os.urandom(100_000), b"xyz" * 7]
    writer.write_many(records[:2])
    writer.write_many(pa.array(records, pa.binary()).slice(2))
    writer.write_many(pa.array([], pa.binary()))
    writer.close()
    got = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type="GZIP")]
    assert got == records
    assert writer.count == 4

  def test_local_file_helpers(self, tmp_path):
    io_lib.makedirs(str(tmp_path / "d" / "e"))
    with io_lib.open_write(str(tmp_path / "d" / "e" / "f.txt")) as f:
      f.write(b"hello")
    assert io_lib.glob(str(tmp_path / "d" / "*" / "*.txt")) == [str(tmp_path / "d/e/f.txt")]
    assert io_lib.size(str(tmp_path / "d/e/f.txt")) == 5
    io_lib.rename(str(tmp_path / "d/e/f.txt"), str(tmp_path / "d/g.txt"))
    assert not io_lib.is_gzip(str(tmp_path / "d/g.txt"))
    io_lib.rmtree(str(tmp_path / "d"))
    assert not (tmp_path / "d").exists()


def test_tf_gfile_paths_are_read_and_written(tmp_path):
  """A scheme Beam does not know (here ram://) goes through tf.io.gfile, gzip included."""
  base = f"ram://{tmp_path.name}"
  with tf.io.gfile.GFile(f"{base}/in/a.csv", "wb") as f:
    f.write(b"x,label\n" + b"".join(b"%d,%d\n" % (i, i % 2) for i in range(1000)))
  with tf.io.gfile.GFile(f"{base}/in/b.csv.gz", "wb") as f:
    f.write(gzip.compress(b"x,label\n1,1\n2,0\n"))
  paths = io_lib.glob(f"{base}/in/*")
  assert paths == [f"{base}/in/a.csv", f"{base}/in/b.csv.gz"]
  assert csv_profile.profile_column(paths, "label").value_counts == {0: 501, 1: 501}
  assert csv_infer.infer_column_types(paths) == {"x": "int", "label": "int"}
  options = csv_batch.ConvertOptions(column_types={"x": "int", "label": "int"}, label_key="label")
  plan = csv_split.SplitPlan(("train", "eval"), (2, 1))
  out = {s: f"{base}/out/Split-{s}" for s in plan.names}
  rows = 0
  for chunk in [*csv_read.plan_chunks(paths[0], 2048), csv_read.Chunk(paths[1])]:
    name = f"data-{chunk.path[-1]}{chunk.index}"
    rows += csv_convert.convert_file(chunk, options, plan, out, name, f"{base}/q").rows_read
  shards = tf.io.gfile.glob(f"{base}/out/Split-*/*.gz")
  written = tf.data.TFRecordDataset(shards, compression_type="GZIP")
  assert rows == sum(1 for _ in written) == 1002


class TestPlanning:
  def test_plan_files_hash_split_and_rolling_window(self, tmp_path):
    for span in (1, 2, 3):
      _write(tmp_path / f"span-{span}" / "a.csv", "x\n1\n")
    plan = example_gen_lib.plan_files(
      str(tmp_path),
      [("s", "span-3/*")],
      True,
      span=3,
      rolling=2,
      unresolved_pattern="span-{SPAN}/*",
    )
    assert [os.path.relpath(p, tmp_path) for p in plan.paths] == ["span-2/a.csv", "span-3/a.csv"]
    assert plan.spans == (2, 3)
    assert all(split is None for _, split in plan.files)

  def test_plan_files_input_splits_and_no_match(self, tmp_path):
    _write(tmp_path / "train" / "a.csv", "x\n1\n")
    _write(tmp_path / "eval" / "b.csv", "x\n1\n")
    plan = example_gen_lib.plan_files(
      str(tmp_path), [("train", "train/*"), ("eval", "eval/*")], hash_split=False
    )
    assert [s for _, s in plan.files] == ["train", "eval"]
    with pytest.raises(csv_errors.CsvInputError, match="no CSV file matches 'test/\\*'"):
      example_gen_lib.plan_files(str(tmp_path), [("test", "test/*")], hash_split=False)

  def test_plan_units_cuts_large_files_only(self, tmp_path, monkeypatch):
    monkeypatch.setattr(example_gen_lib, "CHUNK_BYTES", 10_000)
    big = _write(tmp_path / "big.csv", "x\n" + "123456\n" * 10_000)
    small = _write(tmp_path / "small.csv", "x\n1\n")
    units = example_gen_lib.plan_units([(big, None), (small, "eval")])
    assert [u.index for u in units] == list(range(len(units)))
    assert len([u for u in units if u.chunk.path == big]) > 4
    assert units[-1] == csv_convert.Unit(len(units) - 1, csv_read.Chunk(small), "eval")

  @pytest.mark.parametrize(
    "args, units, size, parallel",
    [
      ([], 8, 1 << 30, True),
      ([], 1, 1 << 30, False),
      ([], 8, 1 << 20, False),
      (["--runner=DataflowRunner"], 8, 1 << 30, False),
      (["--direct_running_mode=in_memory"], 8, 1 << 30, False),
    ],
  )
  def test_direct_runner_args(self, monkeypatch, args, units, size, parallel):
    monkeypatch.setattr(example_gen_lib, "cpu_count", lambda: 2)
    out = example_gen_lib.direct_runner_args(args, units, size)
    assert ("--direct_running_mode=multi_processing" in out) == parallel
    assert out[: len(args)] == args

  def test_check_named_columns(self):
    example_gen_lib.check_named_columns("f.csv", ["a", "label"], ",", "label", "a")
    with pytest.raises(csv_errors.CsvInputError, match=r"pass one of 'a', 'label' as --label-key"):
      example_gen_lib.check_named_columns("f.csv", ["a", "label"], ",", "y")
    with pytest.raises(csv_errors.CsvInputError, match="looks ';'-delimited"):
      example_gen_lib.check_named_columns("f.csv", ["a;label"], ",", "label")
    with pytest.raises(csv_errors.CsvInputError, match="partition_feature_name 'p'"):
      example_gen_lib.check_named_columns("f.csv", ["a"], ",", None, "p")


def _result(file, chunk=0, lines=0, rows=10, bad=0, per_split=None, quarantine=None, error=None):
  return csv_convert.UnitResult(
    file=file,
    chunk=chunk,
    lines=lines,
    rows_read=rows,
    bad_rows=bad,
    rows_per_split=per_split or {"train": rows - bad - 3, "eval": 3},
    quarantine_file=quarantine,
    error=error,
  )


def test_row_hashes_split_deterministically_and_by_ratio():
  rng = np.random.default_rng(0)
  raw = pa.RecordBatch.from_arrays(
    [
      pa.array([str(v).encode() for v in rng.integers(0, 10**6, 30_000)], pa.binary()),
      pa.array([None if i % 3 else b"x" * (i % 50) for i in range(30_000)], pa.binary()),
    ],
    names=["a", "b"],
  )
  keep = np.ones(30_000, dtype=bool)
  keep[::7] = False
  hashes = csv_split.row_hashes(raw, keep)
  assert len(hashes) == keep.sum()
  assert np.array_equal(hashes, csv_split.row_hashes(raw.slice(0), keep))
  assert len(np.unique(hashes)) > 0.99 * len(hashes)
  splits = csv_split.assign_splits(hashes, csv_split.SplitPlan(("train", "eval"), (2, 1)))
  assert abs((splits == 0).mean() - 2 / 3) < 0.02
  by_a = csv_split.row_hashes(raw, keep, column="a")
  assert not np.array_equal(by_a, hashes)
  swapped = pa.RecordBatch.from_arrays([raw.column(0)], names=["a"])
  assert np.array_equal(csv_split.row_hashes(swapped, keep), by_a)


def _lines_digest(data: bytes, skip_header=True, block=7) -> int:
  digest = csv_split.LinesDigest(skip_header)
  for start in range(0, len(data), block):
    digest.update(data[start : start + block])
  return digest.finish()


def test_lines_digest_is_of_the_rows_as_a_multiset():
  data = b"a,b\n1,x\n2,y\n2,\n,z\n"
  digest = _lines_digest(data)
  # Blocks, chunks, row order, CRLF, blank lines and a missing last line end do not count ...
  assert _lines_digest(data, block=1) == _lines_digest(data, block=1000) == digest
  chunks = _lines_digest(b"a,b\n1,x\n2,y\n") + _lines_digest(b"2,\n,z\n", skip_header=False)
  assert chunks % 2**64 == digest
  assert _lines_digest(b"b,a\r\n,z\r\n2,\r\n\r\n1,x\r\n2,y") == digest
  # ... a changed cell, a cell moved, a row more or less do.
  others = [b"a,b\n1,x\n3,y\n2,\n,z\n", b"a,b\n1,x\n2,y\n,2\n,z\n", b"a,b\n1,x\n2,y\n2,\n",
            b"a,b\n1,x\n2,y\n2,\n,z\n1,x\n", b"a,b\n1,y\n2,x\n2,\n,z\n"]  # fmt: skip
  assert digest not in {_lines_digest(o) for o in others}


def test_span_digests_add_up_the_units_of_each_span():
  plan = example_gen_lib.FilePlan(
    (("s1/a.csv", None), ("s2/a.csv", None), ("s2/b.csv", None)), (1, 2), (1, 2, 2)
  )
  results = [
    csv_convert.UnitResult(file="s1/a.csv", rows_read=3, content_digest=2**64 - 1),
    csv_convert.UnitResult(file="s2/a.csv", chunk=0, rows_read=2, content_digest=2**64 - 2),
    csv_convert.UnitResult(file="s2/a.csv", chunk=1, rows_read=1, content_digest=5),
    csv_convert.UnitResult(file="s2/b.csv", rows_read=4, content_digest=1),
  ]
  assert example_gen_lib.span_digests(results, plan) == {
    "1": {"rows": 3, "digest": "ffffffffffffffff"},
    "2": {"rows": 7, "digest": "0000000000000004"},
  }


class TestMergeResults:
  def test_counts_and_merged_quarantine_with_absolute_lines(self, tmp_path):
    parts = []
    for chunk, line in ((0, 5), (1, 2)):
      parts.append(str(tmp_path / "q" / f"data-{chunk}.csv"))
      row = {"file": "f.csv", "chunk": chunk, "line": line, "reason": "why", "row": "1,2"}
      csv_convert.write_quarantine(parts[-1], [row], with_chunk=True)
    results = [
      _result("f.csv", 0, lines=100, rows=100, bad=1, quarantine=parts[0]),
      _result("f.csv", 1, lines=50, rows=50, bad=1, quarantine=parts[1]),
    ]
    out = merge_lib.merge_results(results, ["train", "eval"], 0.1, str(tmp_path / "ex"))
    assert (out.rows, out.bad_rows, out.rows_per_split) == (150, 2, {"train": 142, "eval": 6})
    with open(out.quarantine_uri, newline="") as f:
      merged = list(csv.DictReader(f))
    assert [(r["line"], r["reason"]) for r in merged] == [("6", "why"), ("103", "why")]
    assert not any(os.path.exists(p) for p in parts)

  def test_too_many_bad_rows_keeps_them_beside_the_output(self, tmp_path):
    part = str(tmp_path / "q.csv")
    csv_convert.write_quarantine(part, [{"file": "f", "chunk": 0, "line": 2, "reason": "r"}], True)
    results = [_result("f", bad=1, quarantine=part)]
    with pytest.raises(csv_errors.CsvInputError, match="1 of 10 rows") as err:
      merge_lib.merge_results(results, ["train", "eval"], 0.0, str(tmp_path / "ex"))
    assert os.path.exists(str(tmp_path / "ex") + ".quarantine.csv")
    assert "\n" not in str(err.value)

  @pytest.mark.parametrize(
    "results, message",
    [
      ([_result("f", error="f: header differs")], "f: header differs"),
      ([_result("f", rows=0, per_split={})], "header but no data rows"),
      ([_result("f", per_split={"train": 10, "eval": 0})], "split 'eval' received no rows"),
    ],
  )
  def test_user_errors(self, tmp_path, results, message):
    with pytest.raises(csv_errors.CsvInputError, match=message):
      merge_lib.merge_results(results, ["train", "eval"], 0.0, str(tmp_path / "ex"))

  def test_read_results_reads_json_lines_and_cleans_up(self, tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    (d / "unit-1.jsonl").write_text(_result("a").to_json() + "\n" + _result("b").to_json() + "\n")
    results = merge_lib.read_results(str(d))
    assert [r.file for r in results] == ["a", "b"]
    assert not d.exists()
    assert json.loads(results[0].to_json())["file"] == "a"


def test_resolve_without_driver_is_a_no_op_after_the_driver(tmp_path):
  from tests.support.example_gen_runs import exec_properties

  props = exec_properties(tmp_path, pattern="span-3/*")
  assert example_gen_lib.resolve_without_driver(props) is None
  del props["span"]
  _write(tmp_path / "span-3" / "a.csv", "x\n1\n")
  resolved = example_gen_lib.resolve_without_driver(props)
  assert resolved["span"] == 0 and resolved["input_fingerprint"]
  props = exec_properties(tmp_path, pattern="nope-{SPAN}/*")
  with pytest.raises(csv_errors.CsvInputError, match="cannot resolve the span"):
    example_gen_lib.resolve_without_driver(props)


def test_quarantine_text_round_trips(tmp_path):
  path = str(tmp_path / "q.csv")
  rows = [{"file": "f", "line": 3, "reason": "r", "row": 'a,"b"\nc\0'}]
  csv_convert.write_quarantine(path, rows)
  back = list(csv_convert.iter_quarantine_rows([path]))
  assert back[0]["row"] == 'a,"b"\nc\\0'
  assert pathlib.Path(path).read_text().startswith("file,line,reason,row")


def _list_array(values: pa.Array) -> pa.Array:
  valid = np.asarray(values.is_valid(), dtype=bool)
  offsets = np.concatenate([[0], np.cumsum(valid)]).astype(np.int32)
  return pa.ListArray.from_arrays(pa.array(offsets), values.drop_null())


def _random_column(rng, n, kind, nulls):
  mask = rng.random(n) < nulls
  if kind == "int":
    values = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64) >> rng.integers(0, 64, n)
    return pa.array(values, pa.int64(), mask=mask)
  if kind == "small_int":
    return pa.array(rng.integers(0, 128, n), pa.int64(), mask=mask)
  if kind == "float":
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    return pa.array(bits.view(np.float32), pa.float32(), mask=mask)  # NaNs and infinities too.
  cells = [bytes(rng.integers(0, 256, int(rng.integers(0, 300)), dtype=np.uint8)) for _ in range(n)]
  return pa.array([None if m else c for m, c in zip(mask, cells, strict=True)], pa.binary())


@pytest.mark.parametrize("seed", range(12))
def test_serialized_examples_equal_tfx_bsl_encoder_output(seed):
  """tfexample_lib against tfx_bsl's C++ RecordBatchToExamples, compared as parsed protos."""
  from tfx_bsl.coders import example_coder

  from components.example_gen import tfexample_lib

  rng = np.random.default_rng(seed)
  n = int(rng.integers(1, 400))
  columns = []
  for j in range(int(rng.integers(1, 8))):
    kind = ["int", "small_int", "float", "string", "unknown"][int(rng.integers(0, 5))]
    name = ["a", "b" * 200, "ü", "x y"][j % 4] + str(j)
    nulls = [0.0, 0.3, 1.0][int(rng.integers(0, 3))]
    values = None if kind == "unknown" else _random_column(rng, n, kind, nulls)
    written = {"small_int": "int", "unknown": "unknown"}.get(kind, kind)
    columns.append((name, written, values))
  ours = tfexample_lib.serialize_examples(columns, n).to_pylist()
  arrays = [
    pa.nulls(n, pa.list_(pa.int64())) if v is None else _list_array(v) for _, _, v in columns
  ]
  batch = pa.RecordBatch.from_arrays(arrays, [name for name, _, _ in columns])
  reference = example_coder.RecordBatchToExamples(batch)
  assert len(ours) == len(reference) == n
  for mine, theirs in zip(ours, reference, strict=True):
    a, b = tf.train.Example.FromString(mine), tf.train.Example.FromString(theirs)
    assert a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True)


def test_serialize_no_columns_and_no_rows():
  from components.example_gen import tfexample_lib

  empty = [
    tf.train.Example.FromString(r) for r in tfexample_lib.serialize_examples([], 2).to_pylist()
  ]
  assert [len(e.features.feature) for e in empty] == [0, 0]
  assert len(tfexample_lib.serialize_examples([("a", "int", pa.array([], pa.int64()))], 0)) == 0


def test_a_process_that_exits_right_after_reading_a_column_exits_cleanly(tmp_path):
  # A preflight error exits right after its last read. Arrow's read-ahead used to drop the
  # reader's Python row handler on its own thread while the interpreter shut down, and about 1
  # exit in 8 aborted (exit code 134, "terminate called without an active exception").
  import subprocess
  import sys

  path = tmp_path / "cats.csv"
  path.write_text("Sex,Bwt\n" + "".join(f"{'FM'[i % 2]},{2 + i / 100}\n" for i in range(144)))
  script = (
    "import sys\n"
    "from components.example_gen import csv_profile\n"
    f"for values in csv_profile.column_batches([{str(path)!r}], 'Sex'):\n"
    "  pass\n"
    "sys.exit(2)\n"
  )
  root = pathlib.Path(__file__).resolve().parents[2]
  codes = [
    subprocess.run(
      [sys.executable, "-c", script], cwd=root, capture_output=True, check=False, timeout=60
    ).returncode
    for _ in range(24)
  ]
  assert codes == [2] * 24
