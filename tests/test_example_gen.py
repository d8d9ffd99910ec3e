"""CsvExampleGen: construction, executor output, bad input and parity with stock CsvExampleGen."""

import collections
import csv
import io
import itertools
import json
import os
import pathlib

import numpy as np
import pytest
from tfx.components.example_gen.csv_example_gen import executor as stock_executor
from tfx.proto import example_gen_pb2

from components.example_gen import CsvExampleGen, csv_lib
from components.example_gen import executor as fast_executor
from components.example_gen.component_spec import (
  LABEL_KEY_KEY,
  MAX_BAD_ROW_FRACTION_KEY,
  ROLLING_SPANS_KEY,
  SCHEMA_PATH_KEY,
  UNRESOLVED_INPUT_CONFIG_KEY,
)
from tests.example_gen_utils import exec_properties, read_examples, run_executor


def _write_csv(path, header, rows, newline="\n"):
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w", newline="") as f:
    w = csv.writer(f, lineterminator=newline)
    w.writerow(header)
    w.writerows(rows)
  return path


def _good_rows(n, seed=0):
  rng = np.random.default_rng(seed)
  return [
    [int(rng.integers(0, 17)), float(np.round(rng.normal(), 4)), f"c{i % 3}", i % 10]
    for i in range(n)
  ]


HEADER = ["pix", "score", "cat", "label"]


class TestComponent:
  def test_wires_stock_contract_and_options(self, tmp_path):
    c = CsvExampleGen(input_base=str(tmp_path), label_key="label", max_bad_row_fraction=0.1)
    assert c.outputs["examples"].type_name == "Examples"
    props = c.exec_properties
    assert props[LABEL_KEY_KEY] == "label"
    assert props[MAX_BAD_ROW_FRACTION_KEY] == pytest.approx(0.1)
    assert json.loads(props[UNRESOLVED_INPUT_CONFIG_KEY])["splits"][0]["pattern"] == "*"
    assert props["output_file_format"] == example_gen_pb2.FORMAT_TFRECORDS_GZIP
    assert c.executor_spec.executor_class is fast_executor.Executor
    # Keeps the FileBasedExampleGen driver, so {SPAN} resolves on every orchestrator.
    from tfx.components.example_gen.component import FileBasedExampleGen

    assert isinstance(c, FileBasedExampleGen)

  @pytest.mark.parametrize(
    "kwargs, message",
    [
      ({"max_bad_row_fraction": 1.5}, "between 0 and 1"),
      ({"delimiter": ",;"}, "single character"),
      ({"rolling_spans": 0}, "1 or more"),
      ({"rolling_spans": 3}, "{SPAN}"),
      ({"block_size": 10}, "at least 1024"),
    ],
  )
  def test_rejects_options_that_cannot_work(self, tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
      CsvExampleGen(input_base=str(tmp_path), **kwargs)


class TestExecutor:
  def test_writes_gzipped_splits_with_counts_and_types(self, tmp_path):
    _write_csv(tmp_path / "in" / "a.csv", HEADER, _good_rows(300))
    ex = run_executor(
      fast_executor.Executor, exec_properties(tmp_path / "in", label_key="label"), tmp_path / "out"
    )
    train = read_examples(ex.uri, "train")
    evals = read_examples(ex.uri, "eval")
    assert len(train) + len(evals) == 300
    assert 150 < len(train) < 250  # 2:1 hash split
    assert ex.get_int_custom_property("num_rows_train") == len(train)
    assert ex.get_int_custom_property("num_rows_eval") == len(evals)
    assert ex.get_int_custom_property("num_bad_rows") == 0
    types = json.loads(ex.get_string_custom_property("column_types"))
    assert types == {"pix": "int", "score": "float", "cat": "string", "label": "int"}
    assert json.loads(ex.split_names) == ["train", "eval"]
    assert ex.get_string_custom_property("file_format") == "tfrecords_gzip"
    row = train[0]
    assert isinstance(row["pix"][0], int) and isinstance(row["cat"][0], bytes)

  def test_split_is_deterministic(self, tmp_path):
    _write_csv(tmp_path / "in" / "a.csv", HEADER, _good_rows(200))
    a = run_executor(fast_executor.Executor, exec_properties(tmp_path / "in"), tmp_path / "o1")
    b = run_executor(fast_executor.Executor, exec_properties(tmp_path / "in"), tmp_path / "o2")
    assert read_examples(a.uri, "eval") == read_examples(b.uri, "eval")

  def test_same_feature_values_as_stock_csv_example_gen(self, tmp_path, digits_csv):
    src = tmp_path / "in" / "digits.csv"
    src.parent.mkdir()
    src.write_bytes(digits_csv.read_bytes())
    ours = run_executor(fast_executor.Executor, exec_properties(src.parent), tmp_path / "ours")
    stock = run_executor(stock_executor.Executor, exec_properties(src.parent), tmp_path / "stock")

    def bag(uri):
      return collections.Counter(tuple(sorted(r.items())) for r in read_examples(uri))

    assert sum(bag(ours.uri).values()) == 1797
    assert bag(ours.uri) == bag(stock.uri)

  def test_types_come_from_a_given_schema(self, tmp_path):
    _write_csv(tmp_path / "in" / "a.csv", HEADER, _good_rows(50))
    schema = tmp_path / "schema.pbtxt"
    schema.write_text(
      'feature { name: "pix" type: FLOAT }\nfeature { name: "score" type: FLOAT }\n'
      'feature { name: "cat" type: BYTES }\nfeature { name: "label" type: INT }\n'
    )
    ex = run_executor(
      fast_executor.Executor,
      exec_properties(tmp_path / "in", **{SCHEMA_PATH_KEY: str(schema)}),
      tmp_path / "out",
    )
    assert json.loads(ex.get_string_custom_property("column_types"))["pix"] == "float"
    assert isinstance(read_examples(ex.uri)[0]["pix"][0], float)

  def test_rolling_window_reads_the_newest_spans(self, tmp_path):
    for span in (1, 2, 3):
      _write_csv(tmp_path / "in" / f"span-{span}" / "d.csv", HEADER, _good_rows(30, seed=span))
    raw = exec_properties(tmp_path / "in", pattern="span-{SPAN}/*")
    props = exec_properties(
      tmp_path / "in",
      pattern="span-3/*",
      **{ROLLING_SPANS_KEY: 2, UNRESOLVED_INPUT_CONFIG_KEY: raw["input_config"]},
    )
    props["span"] = 3
    ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
    assert len(read_examples(ex.uri)) == 60
    assert json.loads(ex.get_string_custom_property("data_spans")) == [2, 3]


def _bad_csv(tmp_path, body: bytes):
  d = tmp_path / "in"
  d.mkdir(exist_ok=True)
  good = "".join(f"{i % 17},{i / 10},{i % 10}\n" for i in range(20)).encode()
  (d / "data.csv").write_bytes(b"pix,score,label\n" + good + body)
  return d


class TestBadInput:
  @pytest.mark.parametrize(
    "body, reason",
    [
      (b"1,2\n", "expected 3 fields, found 2"),
      (b"1,2,3,4\n", "expected 3 fields, found 4"),
      (b"x,0.5,3\n", "'x' is not an integer"),
      (b"1,abc,3\n", "'abc' is not a number"),
      (b"1,nan,3\n", "NaN or infinity"),
      (b"1,inf,3\n", "NaN or infinity"),
      (b"1,0.5,\n", "missing label"),
      (b"1,0.5,\xff\xfe\n", "not valid UTF-8"),
    ],
  )
  def test_bad_row_is_quarantined_with_line_and_reason(self, tmp_path, body, reason):
    d = _bad_csv(tmp_path, body + b"2,0.25,4\n")
    props = exec_properties(d, label_key="label", **{MAX_BAD_ROW_FRACTION_KEY: 0.5})
    ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
    assert len(read_examples(ex.uri)) == 21
    assert ex.get_int_custom_property("num_bad_rows") == 1
    q = ex.get_string_custom_property("quarantine_uri")
    rows = list(csv.DictReader(io.StringIO(pathlib.Path(q).read_text())))
    assert len(rows) == 1
    assert rows[0]["line"] == "22"
    assert rows[0]["file"].endswith("data.csv")
    assert reason in rows[0]["reason"]

  def test_default_threshold_fails_with_one_clear_message(self, tmp_path):
    d = _bad_csv(tmp_path, b"x,0.5,3\n")
    out = tmp_path / "out"
    with pytest.raises(csv_lib.CsvInputError) as err:
      run_executor(fast_executor.Executor, exec_properties(d, label_key="label"), out)
    msg = str(err.value)
    assert "1 of 21 rows" in msg and "more than the allowed 0.00%" in msg
    kept = msg.split("see ")[1].split(" and fix", maxsplit=1)[0]
    assert os.path.exists(kept)  # survives the launcher deleting the failed output

  def test_non_finite_allowed_when_asked(self, tmp_path):
    d = _bad_csv(tmp_path, b"1,nan,3\n")
    ex = run_executor(
      fast_executor.Executor, exec_properties(d, allow_non_finite=1), tmp_path / "out"
    )
    assert ex.get_int_custom_property("num_bad_rows") == 0

  @pytest.mark.parametrize(
    "content, message",
    [
      (b"", "is empty"),
      (b"pix,score,label\n", "header but no data rows"),
      (b"pix,,label\n1,2,3\n", "blank column name"),
      (b"a,a,label\n1,2,3\n", "duplicate column names"),
    ],
  )
  def test_unusable_files_fail_clearly(self, tmp_path, content, message):
    d = tmp_path / "in"
    d.mkdir()
    (d / "data.csv").write_bytes(content)
    with pytest.raises(csv_lib.CsvInputError, match=message):
      run_executor(fast_executor.Executor, exec_properties(d), tmp_path / "out")

  def test_missing_label_column_names_the_columns(self, tmp_path):
    d = _bad_csv(tmp_path, b"")
    with pytest.raises(csv_lib.CsvInputError, match=r"label column 'target' is not in the header"):
      run_executor(fast_executor.Executor, exec_properties(d, label_key="target"), tmp_path / "o")

  def test_no_matching_files(self, tmp_path):
    (tmp_path / "in").mkdir()
    with pytest.raises(csv_lib.CsvInputError, match="no CSV file matches"):
      run_executor(fast_executor.Executor, exec_properties(tmp_path / "in"), tmp_path / "o")

  def test_crlf_bom_quotes_and_embedded_newlines(self, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    body = b"".join(
      b'"a, b",%d\r\n"multi\nline",%d\r\n"say ""hi""",%d\r\n' % (i, i, i) for i in range(10)
    )
    (d / "data.csv").write_bytes(b"\xef\xbb\xbfname,label\r\n" + body)
    ex = run_executor(
      fast_executor.Executor, exec_properties(d, label_key="label"), tmp_path / "out"
    )
    names = sorted({r["name"][0] for r in read_examples(ex.uri)})
    assert names == [b"a, b", b"multi\nline", b'say "hi"']
    assert ex.get_int_custom_property("num_bad_rows") == 0


def test_infer_column_types_tolerates_one_bad_sample_cell(tmp_path):
  rows = [[i, i * 0.5, "s"] for i in range(300)] + [["oops", 1.0, "s"]]
  path = _write_csv(tmp_path / "a.csv", ["i", "f", "s"], rows)
  assert csv_lib.infer_column_types([str(path)]) == {"i": "int", "f": "float", "s": "string"}


class TestChunks:
  def test_plan_chunks_cuts_at_line_ends_and_covers_the_file(self, tmp_path):
    path = _write_csv(
      tmp_path / "a.csv", [*HEADER[:2], "label"], [[i, i * 0.5, i % 10] for i in range(5000)]
    )
    chunks = csv_lib.plan_chunks(str(path), target_bytes=10_000)
    data = path.read_bytes()
    assert len(chunks) > 3
    assert chunks[0].start == data.index(b"\n") + 1
    assert chunks[-1].end == len(data)
    for a, b in itertools.pairwise(chunks):
      assert a.end == b.start and data[b.start - 1 : b.start] == b"\n"

  def test_quoted_files_stay_whole(self, tmp_path):
    path = _write_csv(tmp_path / "a.csv", ["s", "label"], [[f"a,{i}", i % 3] for i in range(5000)])
    assert csv_lib.plan_chunks(str(path), target_bytes=10_000) == [csv_lib.Chunk(str(path))]

  def test_chunked_conversion_matches_whole_file_and_keeps_line_numbers(
    self, tmp_path, monkeypatch
  ):
    rows = [[i % 17, i / 7, i % 10] for i in range(6000)]
    rows[4321][0] = "bad"
    _write_csv(tmp_path / "in" / "a.csv", ["pix", "score", "label"], rows)
    props = exec_properties(tmp_path / "in", label_key="label", **{MAX_BAD_ROW_FRACTION_KEY: 0.01})
    whole = run_executor(fast_executor.Executor, props, tmp_path / "whole")
    monkeypatch.setattr(fast_executor, "_MIN_CHUNK_BYTES", 20_000)
    monkeypatch.setattr(fast_executor, "_MAX_CHUNK_BYTES", 20_000)
    chunked = run_executor(fast_executor.Executor, props, tmp_path / "chunked")
    assert len(os.listdir(os.path.join(chunked.uri, "Split-train"))) > 3

    def bag(uri):
      return collections.Counter(tuple(sorted(r.items())) for r in read_examples(uri))

    assert bag(chunked.uri) == bag(whole.uri)
    assert sum(bag(chunked.uri).values()) == 5999
    for ex in (whole, chunked):
      q = list(
        csv.DictReader(
          io.StringIO(pathlib.Path(ex.get_string_custom_property("quarantine_uri")).read_text())
        )
      )
      assert [r["line"] for r in q] == ["4323"]  # header is line 1, rows[0] line 2
