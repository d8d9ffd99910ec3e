"""CsvExampleGen: construction, executor output, bad input and parity with stock CsvExampleGen."""

import collections
import csv
import gzip
import io
import itertools
import json
import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from tfx.components.example_gen.csv_example_gen import executor as stock_executor
from tfx.proto import example_gen_pb2
from tfx.types import standard_component_specs as specs
from tfx.utils import proto_utils

from components.example_gen import (
  CsvExampleGen,
  csv_errors,
  csv_profile,
  csv_read,
  csv_split,
  example_gen_lib,
)
from components.example_gen import executor as fast_executor
from components.example_gen.spec import (
  BLOCK_SIZE_KEY,
  DELIMITER_KEY,
  KEEP_LABEL_TOKENS_KEY,
  LABEL_KEY_KEY,
  LENIENT_COLUMNS_KEY,
  MAX_BAD_ROW_FRACTION_KEY,
  ROLLING_SPANS_KEY,
  SCHEMA_PATH_KEY,
  UNRESOLVED_INPUT_CONFIG_KEY,
)
from core import properties
from tests.support.example_gen_runs import (
  BEYOND_INT64,
  canonical_example,
  exec_properties,
  read_examples,
  read_records,
  run_executor,
  write_messy_csv,
)


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
    with pytest.raises(
      csv_errors.CsvInputError, match=message.replace("{", r"\{").replace("}", r"\}")
    ):
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

  def test_duplicate_rows_spread_over_the_splits_like_any_others(self, tmp_path):
    # 600 identical rows: a content hash (stock TFX) puts every one in the same split.
    _write_csv(tmp_path / "in" / "a.csv", HEADER, [[1, 0.5, "c0", 3]] * 600)
    ex = run_executor(fast_executor.Executor, exec_properties(tmp_path / "in"), tmp_path / "out")
    assert 330 < ex.get_int_custom_property("num_rows_train") < 470  # 2:1 of 600

  def test_the_split_does_not_depend_on_the_label(self, tmp_path):
    rows = _good_rows(400)
    _write_csv(tmp_path / "a" / "a.csv", HEADER, rows)
    _write_csv(tmp_path / "b" / "a.csv", HEADER, [[*r[:3], 9 - r[3]] for r in rows])
    a = run_executor(fast_executor.Executor, exec_properties(tmp_path / "a"), tmp_path / "oa")
    b = run_executor(fast_executor.Executor, exec_properties(tmp_path / "b"), tmp_path / "ob")

    def features(uri):
      return [
        tuple(sorted((k, v) for k, v in r.items() if k != "label"))
        for r in read_examples(uri, "eval")
      ]

    assert features(a.uri) == features(b.uri)

  def test_split_column_keeps_groups_together(self, tmp_path):
    rows = [[i % 40, float(i), f"c{i % 3}", i % 10] for i in range(600)]
    _write_csv(tmp_path / "in" / "a.csv", HEADER, rows)
    props = exec_properties(tmp_path / "in")
    output_config = example_gen_pb2.Output()
    proto_utils.json_to_proto(props[specs.OUTPUT_CONFIG_KEY], output_config)
    output_config.split_config.partition_feature_name = "pix"
    props[specs.OUTPUT_CONFIG_KEY] = proto_utils.proto_to_json(output_config)
    ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
    train = {r["pix"] for r in read_examples(ex.uri, "train")}
    evals = {r["pix"] for r in read_examples(ex.uri, "eval")}
    assert train and evals and not train & evals

  def test_grouped_split_counts_what_the_executor_writes(self, tmp_path):
    # Text groups of uneven sizes, empty cells (one group) and two files, read in small
    # blocks so that groups span batches: the forecast the run's preflight makes must be the
    # split the executor writes.
    rng = np.random.default_rng(3)
    header = ["who", "score", "label"]
    for name, n in (("a.csv", 700), ("b.csv", 500)):
      rows = []
      for i in range(n):
        who = "" if rng.random() < 0.2 else f"user {int(rng.zipf(1.6)) % 90}"
        rows.append([who, float(np.round(rng.normal(), 3)), i % 2])
      _write_csv(tmp_path / "in" / name, header, rows)
    props = exec_properties(tmp_path / "in", buckets=(4, 1), **{BLOCK_SIZE_KEY: 4096})
    output_config = example_gen_pb2.Output()
    proto_utils.json_to_proto(props[specs.OUTPUT_CONFIG_KEY], output_config)
    output_config.split_config.partition_feature_name = "who"
    props[specs.OUTPUT_CONFIG_KEY] = proto_utils.proto_to_json(output_config)
    ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
    written = [len(read_examples(ex.uri, split)) for split in ("train", "eval")]

    files = sorted(str(p) for p in (tmp_path / "in").glob("*.csv"))
    plan = csv_split.SplitPlan(("train", "eval"), (4, 1), partition_column="who")
    split = csv_profile.grouped_split(files, "who", plan, block_size=4096)
    assert list(split.rows) == written
    groups = collections.Counter(
      row[0]
      for f in files
      for row in list(csv.reader(pathlib.Path(f).read_text().splitlines()))[1:]
    )
    assert split.groups == len(groups)
    value, rows = groups.most_common(1)[0]
    assert (split.largest_value, split.largest_rows) == (value, rows)

  @pytest.mark.parametrize(
    ("label", "keep_tokens"),
    [("number", False), ("text", False), ("text", True)],
  )
  def test_position_split_counts_what_the_executor_writes(self, tmp_path, label, keep_tokens):
    # The preflight's count of the eval split, for the default split by a row's place: two
    # files in sub-folders (a file's path under the input base is part of its key), labels
    # left empty or written as a missing token, a quoted cell that spans lines, and small
    # blocks so that files span batches.
    rng = np.random.default_rng(7)
    for name, n in (("one/a.csv", 450), ("two/b.csv", 230)):
      rows = []
      for i in range(n):
        cell = str(i % 3) if label == "number" else ("yes", "no", "maybe")[i % 3]
        draw = rng.random()
        cell = "" if draw < 0.1 else ("NA" if draw < 0.2 else cell)
        note = "two\nlines" if i % 37 == 0 else f"n{i}"
        rows.append([float(np.round(rng.normal(), 3)), note, cell])
      _write_csv(tmp_path / "in" / name, ["x", "note", "label"], rows)
    extra = {BLOCK_SIZE_KEY: 2048, LABEL_KEY_KEY: "label", KEEP_LABEL_TOKENS_KEY: int(keep_tokens)}
    props = exec_properties(tmp_path / "in", pattern="*/*.csv", buckets=(4, 1), **extra)
    ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
    written = tuple(len(read_examples(ex.uri, split)) for split in ("train", "eval"))

    base = str(tmp_path / "in")
    files = [f"{base}/one/a.csv", f"{base}/two/b.csv"]
    plan = csv_split.SplitPlan(("train", "eval"), (4, 1), input_base=base)
    counted = csv_profile.position_split(
      files, "label", plan, block_size=2048, keep_text_tokens=keep_tokens
    )
    assert counted == written
    assert 0 < written[1] < sum(written) < 680

  def test_records_the_label_counts_of_each_split(self, tmp_path):
    _write_csv(tmp_path / "in" / "a.csv", HEADER, _good_rows(300))
    ex = run_executor(
      fast_executor.Executor, exec_properties(tmp_path / "in", label_key="label"), tmp_path / "out"
    )
    stats = json.loads(ex.get_string_custom_property("label_stats"))
    for split in ("train", "eval"):
      labels = [r["label"][0] for r in read_examples(ex.uri, split)]
      assert stats[split]["rows"] == len(labels)
      assert stats[split]["counts"] == {str(k): v for k, v in collections.Counter(labels).items()}
      assert stats[split]["total"] == pytest.approx(sum(labels))
      assert stats[split]["total_sq"] == pytest.approx(sum(v * v for v in labels))

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

  def test_resolves_the_latest_span_itself_when_no_driver_ran(self, tmp_path):
    """Open-source Kubeflow runs no ExampleGen driver: the executor gets '{SPAN}' as is."""
    for span in (1, 2):
      _write_csv(tmp_path / "in" / f"span-{span}" / "d.csv", HEADER, _good_rows(20 * span, span))
    props = exec_properties(tmp_path / "in", pattern="span-{SPAN}/*")
    del props["span"]
    from tfx.components.example_gen import driver

    expected = driver.FileBasedDriver(None).resolve_exec_properties(dict(props), None, None)
    ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
    assert len(read_examples(ex.uri)) == 40
    assert ex.get_int_custom_property("span") == 2
    assert ex.get_string_custom_property("input_fingerprint") == expected["input_fingerprint"]
    assert expected["span"] == 2
    assert not ex.has_custom_property("version")
    assert json.loads(ex.get_string_custom_property("data_spans")) == [2]

  def test_resolves_span_and_version_and_the_rolling_window_without_driver(self, tmp_path):
    for span, version in ((1, 1), (2, 1), (2, 3), (3, 1), (3, 2)):
      path = tmp_path / "in" / f"span-{span}" / f"v{version}" / "d.csv"
      _write_csv(path, HEADER, _good_rows(10 * span + version, seed=version))
    props = exec_properties(
      tmp_path / "in",
      pattern="span-{SPAN}/v{VERSION}/*",
      **{ROLLING_SPANS_KEY: 1},
    )
    props["span"] = None
    from tfx.components.example_gen import driver

    expected = driver.FileBasedDriver(None).resolve_exec_properties(dict(props), None, None)
    ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
    assert len(read_examples(ex.uri)) == 32  # span 3, version 2
    assert ex.get_int_custom_property("span") == 3
    assert ex.get_int_custom_property("version") == 2
    assert ex.get_string_custom_property("input_fingerprint") == expected["input_fingerprint"]

  def test_rolling_window_without_driver(self, tmp_path):
    for span in (1, 2, 3):
      _write_csv(tmp_path / "in" / f"span-{span}" / "d.csv", HEADER, _good_rows(30, seed=span))
    raw = exec_properties(tmp_path / "in", pattern="span-{SPAN}/*")
    props = {**raw, ROLLING_SPANS_KEY: 2, UNRESOLVED_INPUT_CONFIG_KEY: raw["input_config"]}
    del props["span"]
    ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
    assert len(read_examples(ex.uri)) == 60
    assert json.loads(ex.get_string_custom_property("data_spans")) == [2, 3]

  def test_each_span_gets_a_digest_of_its_rows_in_any_order_and_files(self, tmp_path):
    rows = _good_rows(40, seed=1)
    _write_csv(tmp_path / "in" / "span-1" / "d.csv", HEADER, rows)
    # Span 2: the same rows, in reverse order, in two gzipped files with CRLF line ends.
    reordered = rows[::-1]
    for name, part in (("a.csv", reordered[:15]), ("b.csv", reordered[15:])):
      path = _write_csv(tmp_path / "in" / "span-2" / name, HEADER, part, newline="\r\n")
      path.with_suffix(".csv.gz").write_bytes(gzip.compress(path.read_bytes()))
      path.unlink()
    # Span 3: one cell changed.
    changed = [list(r) for r in rows]
    changed[7][1] = changed[7][1] + 1.0
    _write_csv(tmp_path / "in" / "span-3" / "d.csv", HEADER, changed)
    raw = exec_properties(tmp_path / "in", pattern="span-{SPAN}/*")
    props = {**raw, ROLLING_SPANS_KEY: 3, UNRESOLVED_INPUT_CONFIG_KEY: raw["input_config"]}
    del props["span"]
    ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
    digests = json.loads(ex.get_string_custom_property(properties.EXAMPLES_SPAN_DIGESTS))
    assert sorted(digests) == ["1", "2", "3"]
    assert {d["rows"] for d in digests.values()} == {40}
    assert digests["1"] == digests["2"]
    assert digests["3"]["digest"] != digests["1"]["digest"]

  def test_files_may_order_their_columns_differently(self, tmp_path):
    _write_csv(tmp_path / "in" / "a.csv", HEADER, _good_rows(100))
    reordered = [[r[3], r[2], r[1], r[0]] for r in _good_rows(100, seed=1)]
    reordered[5][1] = "7"  # A stray int in the string column, only in this file.
    reordered[6][2] = "oops"  # A stray string in the float column, only in this file.
    _write_csv(tmp_path / "in" / "b.csv", HEADER[::-1], reordered)
    ex = run_executor(fast_executor.Executor, exec_properties(tmp_path / "in"), tmp_path / "o")
    types = json.loads(ex.get_string_custom_property("column_types"))
    assert types == {"pix": "int", "score": "string", "cat": "string", "label": "int"}
    assert len(read_examples(ex.uri)) == 200

  def test_no_per_record_transform(self):
    with pytest.raises(NotImplementedError, match=r"Executor\.Do"):
      fast_executor.Executor().GetInputSourceToExamplePTransform()

  def test_delimiter_is_honoured_in_inference_and_conversion(self, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    rows = "".join(f"{i};{i / 4};a,b {i % 3};{i % 2}\n" for i in range(60))
    (d / "data.csv").write_text("pix;score;cat;label\n" + rows)
    props = exec_properties(d, label_key="label", **{DELIMITER_KEY: ";"})
    ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
    types = json.loads(ex.get_string_custom_property("column_types"))
    assert types == {"pix": "int", "score": "float", "cat": "string", "label": "int"}
    cats = {r["cat"][0] for r in read_examples(ex.uri)}
    assert cats == {b"a,b 0", b"a,b 1", b"a,b 2"}

  @pytest.mark.parametrize("name", ["data.csv.gz", "data.csv"])
  def test_reads_gzipped_csv_by_its_magic_bytes(self, tmp_path, name):
    plain = _write_csv(tmp_path / "plain" / "data.csv", HEADER, _good_rows(300))
    d = tmp_path / "in"
    d.mkdir()
    (d / name).write_bytes(gzip.compress(plain.read_bytes()))
    ours = run_executor(fast_executor.Executor, exec_properties(d), tmp_path / "gz")
    ref = run_executor(fast_executor.Executor, exec_properties(plain.parent), tmp_path / "ref")
    bag = collections.Counter(map(canonical_example, read_records(ours.uri)))
    assert bag == collections.Counter(map(canonical_example, read_records(ref.uri)))
    assert len(read_examples(ours.uri)) == 300

  def test_empty_cells_are_written_as_stock_writes_them(self, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    rows = "".join(f"{i},{i / 2},s{i},,1\n" for i in range(30))
    (d / "data.csv").write_text("i,f,s,none,label\n" + rows + ",,,,0\n")
    ex = run_executor(fast_executor.Executor, exec_properties(d), tmp_path / "o")
    examples = [tf.train.Example.FromString(r) for r in read_records(ex.uri)]
    empty = next(e for e in examples if e.features.feature["label"].int64_list.value == [0])
    kinds = {k: f.WhichOneof("kind") for k, f in empty.features.feature.items()}
    assert kinds == {
      "i": "int64_list",
      "f": "float_list",
      "s": "bytes_list",
      "none": None,
      "label": "int64_list",
    }
    assert not empty.features.feature["i"].int64_list.value
    assert json.loads(ex.get_string_custom_property("column_types"))["none"] == "unknown"


def test_messy_csv_gives_the_same_examples_as_stock_csv_example_gen(tmp_path):
  """Stock's executor and ours on one messy CSV: the same multiset of tf.Examples, exactly.

  Ours runs with allow_non_finite, so that NaN and infinities are written as stock writes
  them (by default they are quarantined: a deliberate difference).
  """
  d = tmp_path / "in"
  d.mkdir()
  write_messy_csv(d / "messy.csv")
  ours = run_executor(
    fast_executor.Executor, exec_properties(d, allow_non_finite=1), tmp_path / "ours"
  )
  stock = run_executor(stock_executor.Executor, exec_properties(d), tmp_path / "stock")
  ours_bag = collections.Counter(canonical_example(r) for r in read_records(ours.uri))
  stock_bag = collections.Counter(canonical_example(r) for r in read_records(stock.uri))
  assert sum(ours_bag.values()) == 16_000
  assert ours_bag == stock_bag
  types = json.loads(ours.get_string_custom_property("column_types"))
  assert types["late"] == "int" and types["bigint"] == "string"
  assert types["allempty"] == "unknown"
  late = [r["late"] for r in read_examples(ours.uri) if r["late"]]
  assert 17031081401 in {v[0] for v in late}  # Exact: float32 would make it 17031080960.


def _bad_csv(tmp_path, body: bytes):
  d = tmp_path / "in"
  d.mkdir(exist_ok=True)
  good = "".join(f"{i % 17},{i / 10},{i % 10}\n" for i in range(20)).encode()
  (d / "data.csv").write_bytes(b"pix,score,label\n" + good + body)
  return d


def _schema(tmp_path, **types):
  path = tmp_path / "schema.pbtxt"
  path.write_text("".join(f'feature {{ name: "{n}" type: {t} }}\n' for n, t in types.items()))
  return str(path)


def test_cells_longer_than_the_csv_modules_limit_are_read_whole(tmp_path):
  # A long free-text cell is valid data: Python's csv module stops at 128 KiB by default, and
  # the first MiB that the header checks read ends inside the first row's 2 MiB cell.
  first, later = "word, " * 350_000, "x" * (300 << 10)
  d = tmp_path / "in"
  rows = [[1, 0.5, first, 0]] + [[i % 7, i / 10, f"note {i}", i % 2] for i in range(40)]
  rows[20][2] = later
  _write_csv(d / "data.csv", ["pix", "score", "note", "label"], rows)
  # A row with a field too many and a long cell is quarantined (its text cut to 500 characters).
  with open(d / "data.csv", "a") as f:
    f.write(f'1,0.5,"{later}",1,9\n')
  assert csv_read.record_widths(str(d / "data.csv")) == []  # the 1 MiB head holds no whole row
  assert csv_read.read_header(str(d / "data.csv")) == ["pix", "score", "note", "label"]
  props = exec_properties(d, label_key="label", **{MAX_BAD_ROW_FRACTION_KEY: 0.1})
  ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
  notes = {r["note"][0] for r in read_examples(ex.uri)}
  assert first.encode() in notes and later.encode() in notes and len(notes) == 41
  assert ex.get_int_custom_property("num_bad_rows") == 1
  q = pathlib.Path(ex.get_string_custom_property("quarantine_uri")).read_text()
  [row] = list(csv_read.csv_dict_reader(q))
  assert row["reason"] == "expected 4 fields, found 5" and row["row"].startswith('1,0.5,"xxx')


class TestBadInput:
  @pytest.mark.parametrize(
    "body, reason, typed",
    [
      (b"1,2\n", "expected 3 fields, found 2", False),
      (b"1,2,3,4\n", "expected 3 fields, found 4", False),
      (b"1,-nan,3\n", "NaN or infinity", False),  # nan and NaN are missing-value tokens.
      (b"1,inf,3\n", "NaN or infinity", False),
      (b"1,1e39,3\n", "NaN or infinity", False),  # Finite as float64, infinite as float32.
      (b"1,0.5,\n", "missing label", False),
      (b"1,0.5,\xff\xfe\n", "not valid UTF-8", False),
      # Two files joined with their headers: the second header is not read as data (its
      # cells would make both number columns text, and 'label' a class).
      (b"pix,score,label\n", "repeats the header row (files joined with their headers?)", False),
      (b" pix , score,label\n", "repeats the header row", False),
      # Cells that are not numbers only count as bad when a schema gives the types;
      # inferred, they make a string column, as in stock CsvExampleGen.
      (b"x,0.5,3\n", "'x' is not an integer", True),
      (b"1,abc,3\n", "'abc' is not a number", True),
      (b"%s,0.5,3\n" % BEYOND_INT64.encode(), "is not an integer", True),
      (b"0x10,0.5,3\n", "'0x10' is not an integer", True),
      (b"9" * 300 + b",0.5,3\n", "is not an integer", True),
    ],
  )
  def test_bad_row_is_quarantined_with_line_and_reason(self, tmp_path, body, reason, typed):
    d = _bad_csv(tmp_path, body + b"2,0.25,4\n")
    props = exec_properties(d, label_key="label", **{MAX_BAD_ROW_FRACTION_KEY: 0.5})
    if typed:
      props[SCHEMA_PATH_KEY] = _schema(tmp_path, pix="INT", score="FLOAT", label="INT")
    ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
    assert len(read_examples(ex.uri)) == 21
    assert ex.get_int_custom_property("num_bad_rows") == 1
    q = ex.get_string_custom_property("quarantine_uri")
    rows = list(csv.DictReader(io.StringIO(pathlib.Path(q).read_text())))
    assert len(rows) == 1
    assert rows[0]["line"] == "22"
    assert rows[0]["file"].endswith("data.csv")
    assert reason in rows[0]["reason"]

  def test_a_quarantined_row_reads_back_as_its_cells(self, tmp_path):
    d = _bad_csv(tmp_path, b'1,"0,5",3\n2,"say ""hi""\nthere",4\n3,\x00,5\n')
    props = exec_properties(d, label_key="label", **{MAX_BAD_ROW_FRACTION_KEY: 0.5})
    props[SCHEMA_PATH_KEY] = _schema(tmp_path, pix="INT", score="FLOAT", label="INT")
    ex = run_executor(fast_executor.Executor, props, tmp_path / "out")
    q = ex.get_string_custom_property("quarantine_uri")
    rows = list(csv.DictReader(io.StringIO(pathlib.Path(q).read_text())))
    cells = [next(csv.reader(io.StringIO(r["row"]))) for r in rows]
    assert cells == [["1", "0,5", "3"], ["2", 'say "hi"\nthere', "4"], ["3", "\\0", "5"]]

  def test_a_stray_string_makes_a_string_column_as_in_stock(self, tmp_path):
    d = _bad_csv(tmp_path, b"x,0.5,3\n")
    ex = run_executor(fast_executor.Executor, exec_properties(d, label_key="label"), tmp_path / "o")
    assert ex.get_int_custom_property("num_bad_rows") == 0
    assert json.loads(ex.get_string_custom_property("column_types"))["pix"] == "string"
    assert {r["pix"] for r in read_examples(ex.uri)} >= {(b"x",), (b"0",)}

  def test_python_number_syntax_is_read_like_stock(self, tmp_path):
    d = _bad_csv(tmp_path, b" 12,+1.5,+5\n1_000,1_0.5,007\n")
    ex = run_executor(fast_executor.Executor, exec_properties(d, label_key="label"), tmp_path / "o")
    types = json.loads(ex.get_string_custom_property("column_types"))
    assert types == {"pix": "int", "score": "float", "label": "int"}
    rows = read_examples(ex.uri)
    assert {r["pix"][0] for r in rows} >= {12, 1000}
    assert {r["score"][0] for r in rows} >= {1.5, 10.5}
    assert {r["label"][0] for r in rows} >= {5, 7}

  def test_default_threshold_fails_with_one_clear_message(self, tmp_path):
    d = _bad_csv(tmp_path, b"1,0.5\n")
    out = tmp_path / "out"
    with pytest.raises(csv_errors.CsvInputError) as err:
      run_executor(fast_executor.Executor, exec_properties(d, label_key="label"), out)
    msg = str(err.value)
    assert "1 of 21 rows" in msg and "more than the allowed 0.00%" in msg
    assert "(the first, line 22 of " in msg and "expected 3 fields, found 2)" in msg
    kept = msg.split("see ")[1].split(" and fix", maxsplit=1)[0]
    assert os.path.exists(kept)  # survives the launcher deleting the failed output

  def test_rows_without_a_label_are_left_out_not_counted_as_bad(self, tmp_path):
    # As R's airquality (37 of 153 Ozone cells empty): rows that cannot train or score are
    # quarantined and counted, but they are not malformed, so the default threshold holds.
    d = _bad_csv(tmp_path, b"1,0.5,\n2,0.25,NA\n3,0.75,\n")
    ex = run_executor(fast_executor.Executor, exec_properties(d, label_key="label"), tmp_path / "o")
    assert len(read_examples(ex.uri)) == 20
    assert ex.get_int_custom_property("num_bad_rows") == 3
    assert ex.get_int_custom_property("num_unlabeled_rows") == 3
    q = ex.get_string_custom_property("quarantine_uri")
    rows = list(csv.DictReader(io.StringIO(pathlib.Path(q).read_text())))
    assert [(r["line"], r["reason"]) for r in rows] == [
      ("22", "missing label 'label'"),
      ("23", "missing label 'label'"),
      ("24", "missing label 'label'"),
    ]

  def test_a_text_labels_missing_tokens_are_counted_by_token_or_kept_as_classes(self, tmp_path):
    # R writes MASS's survey with Exer 'None' (no exercise); NA is a missing answer. One cell
    # left empty beside the tokens: its bad row has no token (the ExampleGen once failed here).
    d = tmp_path / "in"
    d.mkdir()
    exer = ["Some", "Freq", "None", "Some", "NA", "Freq", "None", "Some", "Freq"] * 4 + [""]
    (d / "survey.csv").write_text(
      "pulse,exer\n" + "".join(f"{70 + i},{e}\n" for i, e in enumerate(exer))
    )
    ex = run_executor(fast_executor.Executor, exec_properties(d, label_key="exer"), tmp_path / "o")
    assert len(read_examples(ex.uri)) == 24
    assert ex.get_int_custom_property("num_unlabeled_rows") == 13
    tokens = json.loads(ex.get_string_custom_property(properties.EXAMPLES_UNLABELED_TOKENS))
    assert tokens == {"NA": 4, "None": 8}

    kept = run_executor(
      fast_executor.Executor,
      exec_properties(d, label_key="exer", **{KEEP_LABEL_TOKENS_KEY: 1}),
      tmp_path / "kept",
    )
    labels = collections.Counter(r["exer"][0] for r in read_examples(kept.uri))
    assert labels == {b"Some": 12, b"Freq": 12, b"None": 8, b"NA": 4}
    assert kept.get_int_custom_property("num_unlabeled_rows") == 1
    assert properties.EXAMPLES_UNLABELED_TOKENS not in kept.mlmd_artifact.custom_properties
    stats = json.loads(kept.get_string_custom_property(properties.EXAMPLES_LABEL_STATS))
    assert {v for split in stats.values() for v in split["counts"]} >= {"None", "NA"}

  def test_malformed_rows_still_count_beside_unlabeled_ones(self, tmp_path):
    d = _bad_csv(tmp_path, b"1,0.5,\n1,0.5\n3,0.75,\n")
    with pytest.raises(csv_errors.CsvInputError) as err:
      run_executor(fast_executor.Executor, exec_properties(d, label_key="label"), tmp_path / "o")
    assert str(err.value).startswith("1 of 23 rows (4.35%) are bad (the first, line 23 of "), str(
      err.value
    )
    assert "expected 3 fields, found 2) (besides 2 without a label), more than the allowed" in (
      str(err.value)
    )

  def test_no_row_with_a_label_fails_clearly(self, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "data.csv").write_bytes(b"pix,label\n" + b"2,\n" * 5)
    props = exec_properties(d, label_key="label")
    props[SCHEMA_PATH_KEY] = _schema(tmp_path, pix="INT", label="INT")
    with pytest.raises(csv_errors.CsvInputError) as err:
      run_executor(fast_executor.Executor, props, tmp_path / "o")
    assert str(err.value).startswith("none of the 5 rows has a label and well-formed cells (5 ")
    assert str(err.value).endswith("fill the label column or check --label-key.")

  def test_a_column_left_out_keeps_the_rows_its_bad_cells_would_fail(self, tmp_path):
    # A notes column exported as Latin-1, and R's Inf in a column the model does not read.
    d = tmp_path / "in"
    d.mkdir()
    rows = b"".join(
      b"%d,%s,%s,%d\n"
      % (i, b"Inf" if i % 9 == 0 else b"%d.5" % i, b"caf\xe9" if i % 7 == 0 else b"ok", i % 2)
      for i in range(60)
    )
    (d / "data.csv").write_bytes(b"x,end,note,label\n" + rows)
    with pytest.raises(csv_errors.CsvInputError) as err:
      run_executor(fast_executor.Executor, exec_properties(d, label_key="label"), tmp_path / "a")
    assert "fix those rows or raise --max-bad-row-fraction." in str(err.value)  # two columns
    only_end = {LABEL_KEY_KEY: "label", LENIENT_COLUMNS_KEY: json.dumps(["note"])}
    with pytest.raises(csv_errors.CsvInputError) as err:
      run_executor(fast_executor.Executor, exec_properties(d, **only_end), tmp_path / "b")
    assert str(err.value).startswith("7 of 60 rows (11.67%) are bad (the first, line 2 of ")
    assert str(err.value).endswith(
      "fix those rows or raise --max-bad-row-fraction, or, if the model need not read 'end', "
      "pass --exclude-columns end (the rows are then kept, with that cell empty)."
    )
    both = {LABEL_KEY_KEY: "label", LENIENT_COLUMNS_KEY: json.dumps(["end", "note"])}
    ex = run_executor(fast_executor.Executor, exec_properties(d, **both), tmp_path / "c")
    assert ex.get_int_custom_property("num_bad_rows") == 0
    records = {r["x"][0]: r for r in read_examples(ex.uri)}
    assert len(records) == 60
    assert records[9]["end"] == () and records[10]["end"] == (pytest.approx(10.5),)
    assert records[7]["note"] == () and records[8]["note"] == (b"ok",)

  def test_non_finite_allowed_when_asked(self, tmp_path):
    d = _bad_csv(tmp_path, b"1,-nan,3\n1,inf,3\n")
    ex = run_executor(
      fast_executor.Executor, exec_properties(d, allow_non_finite=1), tmp_path / "out"
    )
    assert ex.get_int_custom_property("num_bad_rows") == 0

  @pytest.mark.parametrize(
    "content, message",
    [
      (b"", "is empty"),
      (b"pix,score,label\n", "header but no data rows"),
      (b"pix,,label\n1,2,3\n", r"blank column name \(column 2 of 3\); name every column\.$"),
      (b'"","x","label"\n"1",2,3\n', r"\(column 1 of 3\); name every column \(R's write.csv"),
      (b",x,label\n0,2,3\n", r"pandas' to_csv .*: pass row.names = FALSE or index=False\)\.$"),
      (b"a,a,label\n1,2,3\n", "duplicate column names"),
    ],
  )
  def test_unusable_files_fail_clearly(self, tmp_path, content, message):
    d = tmp_path / "in"
    d.mkdir()
    (d / "data.csv").write_bytes(content)
    with pytest.raises(csv_errors.CsvInputError, match=message):
      run_executor(fast_executor.Executor, exec_properties(d), tmp_path / "out")

  def test_missing_label_column_names_the_columns(self, tmp_path):
    d = _bad_csv(tmp_path, b"")
    with pytest.raises(
      csv_errors.CsvInputError, match=r"label column 'target' is not in the header"
    ):
      run_executor(fast_executor.Executor, exec_properties(d, label_key="target"), tmp_path / "o")

  @pytest.mark.parametrize("delimiter, shown", [(b";", "';'"), (b"\t", "'\\t'"), (b"|", "'|'")])
  def test_header_with_another_delimiter_suggests_the_flag(self, tmp_path, delimiter, shown):
    d = tmp_path / "in"
    d.mkdir()
    (d / "data.csv").write_bytes(delimiter.join([b"pix", b"score", b"label"]) + b"\n1" * 3)
    with pytest.raises(csv_errors.CsvInputError) as err:
      run_executor(fast_executor.Executor, exec_properties(d, label_key="label"), tmp_path / "o")
    assert f"pass --delimiter {shown}" in str(err.value)
    assert "\n" not in str(err.value)

  def test_row_longer_than_the_read_block_just_works(self, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    rows = [f"{i},{'w' * (5000 if i == 7 else 3)},{i % 3}\n" for i in range(40)]
    (d / "data.csv").write_text("pix,text,label\n" + "".join(rows))
    props = exec_properties(d, label_key="label", **{BLOCK_SIZE_KEY: 1024})
    ex = run_executor(fast_executor.Executor, props, tmp_path / "o")
    examples = read_examples(ex.uri)
    assert sorted(r["pix"][0] for r in examples) == list(range(40))
    assert max(len(r["text"][0]) for r in examples) == 5000

  def test_no_matching_files(self, tmp_path):
    (tmp_path / "in").mkdir()
    with pytest.raises(csv_errors.CsvInputError, match="no CSV file matches"):
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


class TestChunks:
  def test_plan_chunks_cuts_at_line_ends_and_covers_the_file(self, tmp_path):
    path = _write_csv(
      tmp_path / "a.csv", [*HEADER[:2], "label"], [[i, i * 0.5, i % 10] for i in range(5000)]
    )
    chunks = csv_read.plan_chunks(str(path), target_bytes=10_000)
    data = path.read_bytes()
    assert len(chunks) > 3
    assert chunks[0].start == data.index(b"\n") + 1
    assert chunks[-1].end == len(data)
    for a, b in itertools.pairwise(chunks):
      assert a.end == b.start and data[b.start - 1 : b.start] == b"\n"

  def test_quoted_files_stay_whole(self, tmp_path):
    path = _write_csv(tmp_path / "a.csv", ["s", "label"], [[f"a,{i}", i % 3] for i in range(5000)])
    assert csv_read.plan_chunks(str(path), target_bytes=10_000) == [csv_read.Chunk(str(path))]

  def test_chunked_conversion_matches_whole_file_and_keeps_line_numbers(
    self, tmp_path, monkeypatch
  ):
    rows = [[i % 17, i / 7, i % 10] for i in range(6000)]
    rows[4321] = [1, 2]
    _write_csv(tmp_path / "in" / "a.csv", ["pix", "score", "label"], rows)
    props = exec_properties(tmp_path / "in", label_key="label", **{MAX_BAD_ROW_FRACTION_KEY: 0.01})
    whole = run_executor(fast_executor.Executor, props, tmp_path / "whole")
    monkeypatch.setattr(example_gen_lib, "CHUNK_BYTES", 20_000)
    chunked = run_executor(fast_executor.Executor, props, tmp_path / "chunked")
    assert len(os.listdir(os.path.join(chunked.uri, "Split-train"))) > 3

    def bag(uri, split=None):
      return collections.Counter(tuple(sorted(r.items())) for r in read_examples(uri, split))

    assert bag(chunked.uri) == bag(whole.uri)
    assert sum(bag(chunked.uri).values()) == 5999
    # A row's split follows its place in the file, however the file is cut.
    for split in ("train", "eval"):
      assert bag(chunked.uri, split) == bag(whole.uri, split)
    for ex in (whole, chunked):
      q = list(
        csv.DictReader(
          io.StringIO(pathlib.Path(ex.get_string_custom_property("quarantine_uri")).read_text())
        )
      )
      assert [r["line"] for r in q] == ["4323"]  # header is line 1, rows[0] line 2
