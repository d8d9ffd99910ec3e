"""Fault suite: fuzzed CSV input ends in quarantined rows or one clean error, never a crash."""

from __future__ import annotations

import csv
import os
import pathlib
import random
import re
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from components.example_gen import example_gen_lib
from components.example_gen import executor as fast_executor
from components.example_gen.spec import (
  ALLOW_NON_FINITE_KEY,
  BLOCK_SIZE_KEY,
  LABEL_KEY_KEY,
  MAX_BAD_ROW_FRACTION_KEY,
)
from core.errors import UserInputError
from pipeline.cli import reporting
from tests.support.cli_runs import REPO_ROOT, load_summary, run_script
from tests.support.example_gen_runs import (
  NASTY_ROWS,
  REASON,
  exec_properties,
  read_examples,
  run_executor,
)

DIGITS_CSV = REPO_ROOT / "data" / "digits" / "digits.csv"
# Examples per executor-level fuzz run; each is one real Beam pipeline (about 0.3 to 0.5 s).
FUZZ_EXAMPLES = int(os.environ.get("FAULTS_FUZZ_EXAMPLES", "200"))
HEADER = [b"a", b"b", b"label"]
NASTY_CELLS = [
  b"", b" ", b"nan", b"NaN", b"-nan", b"inf", b"-inf", b"Infinity", b"1e999", b"-1e999",
  b"1e-999", b"99999999999999999999", b"-9223372036854775809", b"0x1F", b"1_000", b"1,5",
  b'"', b'""', b"'", b"\\", b"\xef\xbb\xbf", b"\xef\xbb\xbf1", b"\xff\xfe", b"\x00", b"\r",
  b"\n", b"\r\n", b"a\nb", b"\t7", b" 7 ", b"+3", b"3.", b".5", b"1e5", b"true", b"\xc3",
]  # fmt: skip

_good_row = st.tuples(
  st.integers(-1000, 1000),
  st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
  st.integers(0, 9),
).map(lambda t: [str(t[0]).encode(), repr(t[1]).encode(), str(t[2]).encode()])
_cell = st.one_of(
  st.sampled_from(NASTY_CELLS),
  st.integers().map(lambda i: str(i).encode()),
  st.floats().map(lambda f: repr(f).encode()),
  st.text(max_size=12).map(str.encode),
  st.binary(max_size=12),
  st.integers(0, 9).map(lambda i: str(i).encode()),
)
# Longer than the smallest block size (1 KiB) the cases may choose, up to past the 128 KiB
# field limit of the csv module that reads quarantine files back.
_huge_cell = st.integers(1500, 300_000).map(lambda n: b"7" * n)
_nasty_row = st.lists(st.one_of(_cell, _cell, _cell, _huge_cell), min_size=1, max_size=5)
_odd_header = st.lists(
  st.sampled_from([b"a", b"b", b"label", b"", b" c", b"\xff", b'"q"']), min_size=1, max_size=4
)


def _quote(cell: bytes) -> bytes:
  return b'"' + cell.replace(b'"', b'""') + b'"'


@st.composite
def csv_files(draw):
  """One CSV file's bytes and its number of data rows (None where that is not known)."""
  kind = draw(st.sampled_from(["rows"] * 12 + ["bytes", "empty", "header_only"]))
  if kind == "bytes":
    return draw(st.binary(max_size=3000)), None
  if kind == "empty":
    return draw(st.sampled_from([b"", b"\n", b"\r\n", b"\xef\xbb\xbf", b"  \n\n"])), None
  header = HEADER if draw(st.sampled_from([True] * 9 + [False])) else draw(_odd_header)
  rows = []
  if kind == "rows":
    rows = draw(st.lists(_good_row, min_size=10, max_size=40))
    for row in draw(st.lists(_nasty_row, max_size=6)):
      rows.insert(draw(st.integers(0, len(rows))), row)
  quoting = draw(st.sampled_from(["minimal", "minimal", "all", "none"]))

  def encode(row):
    if quoting == "all":
      return b",".join(_quote(c) for c in row)
    if quoting == "none":  # Quotes and line breaks in cells break the CSV on purpose.
      return b",".join(row)
    if row == [b""]:
      return b'""'  # Else an empty line, which is no row at all.
    special = (b",", b'"', b"\r", b"\n")
    return b",".join(_quote(c) if any(s in c for s in special) else c for c in row)

  lines = [encode(header)]
  blank_lines = draw(st.booleans())
  for row in rows:
    lines.append(encode(row))
    if blank_lines and len(lines) % 5 == 0:
      lines.append(b"")
  newline = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
  body = newline.join(lines) + (newline if draw(st.booleans()) else b"")
  bom = b"\xef\xbb\xbf" if draw(st.booleans()) else b""
  rows_known = quoting != "none" and header == HEADER
  return bom + body, len(rows) if rows_known else None


@st.composite
def csv_cases(draw):
  """One or two input files and the ExampleGen options to read them with."""
  files = [draw(csv_files()) for _ in range(draw(st.sampled_from([1, 1, 1, 2])))]
  props = {
    MAX_BAD_ROW_FRACTION_KEY: draw(st.sampled_from([0.0, 0.5, 1.0, 1.0])),
    ALLOW_NON_FINITE_KEY: int(draw(st.booleans())),
  }
  if draw(st.sampled_from([True, True, False])):
    props[LABEL_KEY_KEY] = "label"
  if draw(st.sampled_from([False, False, False, True])):
    props[BLOCK_SIZE_KEY] = 1024
  return files, props


def _user_error(exc: BaseException) -> UserInputError | None:
  seen, e = set(), exc
  while e is not None and id(e) not in seen:
    seen.add(id(e))
    if isinstance(e, UserInputError):
      return e
    e = e.__cause__ or e.__context__
  return None


def check_case(
  files: list[tuple[bytes, int | None]], props: dict, work: pathlib.Path
) -> tuple[str, str | int]:
  """Runs the ExampleGen executor on the files and checks that the outcome is one of the two.

  Args:
    files: Contents of each input file and its number of data rows, if known.
    props: ExampleGen execution properties besides the input and output configs.
    work: An empty folder for this case.

  Returns:
    ("error", the one-line message) or ("quarantined", the number of quarantined rows).
  """
  in_dir = work / "in"
  in_dir.mkdir()
  paths = []
  for i, (content, _) in enumerate(files):
    paths.append(in_dir / f"part-{i}.csv")
    paths[-1].write_bytes(content)
  try:
    examples = run_executor(fast_executor.Executor, exec_properties(in_dir, **props), work / "out")
  except Exception as e:
    user = _user_error(e)
    if user is None:
      raise  # Any other exception is a bug of ours: keep its traceback.
    message = str(user).strip()
    assert message and "\n" not in message and "\r" not in message, repr(message)
    assert reporting.user_error_message(e) == re.sub(r"\s*\[while running '.*'\]$", "", message)
    return "error", message

  written = len(read_examples(examples.uri))
  per_split = [examples.get_int_custom_property(f"num_rows_{s}") for s in ("train", "eval")]
  assert written == sum(per_split) and all(per_split)
  bad = examples.get_int_custom_property("num_bad_rows")
  # Rows whose only fault is an empty label are left out without counting against the limit.
  unlabeled = examples.get_int_custom_property("num_unlabeled_rows")
  assert 0 <= unlabeled <= bad
  assert bad - unlabeled <= props[MAX_BAD_ROW_FRACTION_KEY] * (written + bad)
  rows_known = [n for _, n in files]
  if None not in rows_known:
    assert written + bad == sum(rows_known)
  quarantine = examples.get_string_custom_property("quarantine_uri")
  if bad:
    with open(quarantine, newline="") as f:
      rows = list(csv.DictReader(f))
    assert len(rows) == bad
    # Line numbers count records; there are no more records than line breaks, plus one.
    contents = {str(p): c for p, (c, _) in zip(paths, files, strict=True)}
    for row in rows:
      content = contents[row["file"]]
      assert 2 <= int(row["line"]) <= content.count(b"\n") + content.count(b"\r") + 1, row
      assert REASON.search(row["reason"]), row
  else:
    assert not quarantine
  leftovers = [n for _, _, names in os.walk(examples.uri) for n in names if n.startswith(".tmp-")]
  assert not leftovers
  return "quarantined", bad


@pytest.mark.timeout(1200)
@settings(
  max_examples=FUZZ_EXAMPLES,
  deadline=None,
  derandomize=True,
  database=None,
  # Each example makes and removes its own folder under tmp_path, and the patch below is
  # the same for every example, so function-scoped fixtures are safe here.
  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=csv_cases())
def test_executor_quarantines_or_fails_in_one_line_on_any_csv(case, tmp_path, monkeypatch):
  """Every generated input gives (a) examples plus a consistent quarantine, or (b) a UserInputError.

  Multi-file cases would start DirectRunner worker processes (seconds each); they run
  in-process here, and `test_user_error_in_a_worker_process_stays_one_line` covers workers.
  """
  monkeypatch.setattr(example_gen_lib, "direct_runner_args", lambda args, *_: list(args))
  files, props = case
  work = pathlib.Path(tempfile.mkdtemp(dir=tmp_path))
  try:
    kind, _ = check_case(files, props, work)
    event(f"outcome: {kind}")  # Shown by --hypothesis-show-statistics.
  finally:
    shutil.rmtree(work)


# Inputs the fuzzer found crashing the executor (fixed in the csv_*.py modules and executor.py).
_GOOD = b"".join(b"%d,%d.5,%d" % (i, i, i % 10) + b"\r\n" for i in range(12))


@pytest.mark.parametrize(
  "content, outcome, detail",
  [
    # pyarrow decodes a ragged row's text as strict UTF-8 before the handler sees it.
    (b"a,b,label\r\n" + _GOOD + b"\xc3,4,5,6,\xda\r\n", "quarantined", 1),
    # A header with no line end: Arrow cannot skip it, and there are no data rows.
    (b"a,b,label", "error", "header but no data rows"),
    # A BOM, then bytes that are not UTF-8 in the header: the error offset ignored the BOM.
    (b"\xef\xbb\xbfa,\xff\r\n1,2\r\n", "error", "header line is not valid UTF-8"),
    # CR line ends and a bad byte on line 2: the header itself was still good.
    (b"a,b,label\r\xff,1.5,2\r" + _GOOD.replace(b"\r\n", b"\r"), "quarantined", 1),
    # A NUL byte in a quarantined row: Python 3.10's csv module cannot write it.
    (b"a,b,label\r\n" + _GOOD + b",,,\x00\r\n", "quarantined", 1),
    # A huge bad row: its text outgrew the csv module's 128 KiB field limit on read-back.
    (b"a,b,label\r\n" + _GOOD + b"9" * 200_000 + b",1.5\r\n", "quarantined", 1),
    # A huge number: Python's int() refuses 4300+ digits, so its column is a float column
    # (as in stock), where it is an infinity.
    (b"a,b,label\r\n" + _GOOD + b"9" * 200_000 + b",1.5,2\r\n", "quarantined", 1),
  ],
)
def test_inputs_that_crashed_the_executor(tmp_path, monkeypatch, content, outcome, detail):
  monkeypatch.setattr(example_gen_lib, "direct_runner_args", lambda args, *_: list(args))
  props = {MAX_BAD_ROW_FRACTION_KEY: 0.5, ALLOW_NON_FINITE_KEY: 0, LABEL_KEY_KEY: "label"}
  kind, result = check_case([(content, None)], props, tmp_path)
  assert kind == outcome
  assert detail in result if kind == "error" else result == detail


def test_ragged_row_with_undecodable_bytes_keeps_its_line_and_reason(tmp_path):
  d = tmp_path / "in"
  d.mkdir()
  good = b"".join(b"%d,%d.5,%d\n" % (i, i, i % 10) for i in range(20))
  (d / "d.csv").write_bytes(b"a,b,label\n" + good + b"\xc3,4,5,6,\xda\n7,\xff,2\n" + good)
  ex = run_executor(
    fast_executor.Executor,
    exec_properties(d, **{LABEL_KEY_KEY: "label", MAX_BAD_ROW_FRACTION_KEY: 0.1}),
    tmp_path / "out",
  )
  assert len(read_examples(ex.uri)) == 40
  with open(ex.get_string_custom_property("quarantine_uri"), newline="") as f:
    rows = [(r["line"], r["reason"]) for r in csv.DictReader(f)]
  assert rows == [
    ("22", "expected 3 fields, found 5"),
    ("23", "column 'b': bytes are not valid UTF-8"),
  ]


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_user_error_in_a_worker_process_stays_one_line(tmp_path, monkeypatch):
  """Two input files mean two units on DirectRunner worker processes, which hand exceptions
  back as RuntimeErrors holding a traceback; the user error must still come out as itself."""
  monkeypatch.setattr(example_gen_lib, "PARALLEL_MIN_BYTES", 0)
  d = tmp_path / "in"
  d.mkdir()
  (d / "a.csv").write_bytes(b"a,b,label\n1,2,3\n")
  (d / "b.csv").write_bytes(b"a,c,label\n1,2,3\n")
  with pytest.raises(UserInputError) as err:
    run_executor(fast_executor.Executor, exec_properties(d, label_key="label"), tmp_path / "o")
  message = str(err.value)
  assert "header differs from the other input files" in message
  assert "\n" not in message and "Traceback" not in message


def _bad_data(tmp_path: pathlib.Path, case: str) -> pathlib.Path:
  data = tmp_path / "data"
  data.mkdir()
  if case == "nasty_rows":
    (data / "digits.csv").write_bytes(DIGITS_CSV.read_bytes() + NASTY_ROWS)
  elif case == "headers_differ":
    (data / "a.csv").write_bytes(DIGITS_CSV.read_bytes())
    (data / "b.csv").write_bytes(b"\xef\xbb\xbfx,label\r\n1,2\r\n")
  else:
    (data / "d.csv").write_bytes(random.Random(7).randbytes(4000))
  return data


@pytest.mark.e2e
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
  "case, exit_code",
  # Random bytes have no readable header: run_local.py's up-front label check (which reads
  # the label column with csv_profile.profile_column) stops it, before any pipeline runs.
  [("nasty_rows", 1), ("headers_differ", 1), ("random_bytes", 2)],
)
def test_cli_on_bad_csv_fails_in_one_line_and_pushes_nothing(tmp_path, case, exit_code):
  """The real run_local.py on fuzzer-style inputs under the default --max-bad-row-fraction 0.

  Reading of "nothing is pushed": with the default threshold every bad row fails the run, so
  no model may reach serving/. With a tolerant threshold the run goes on and may push a model
  trained on the good rows; that case is the shared run in test_faults_concurrency.py.
  """
  out = tmp_path / "out"
  proc = run_script(
    "run_local.py", "--data-root", _bad_data(tmp_path, case), "--output-dir", out,
    "--optimizer-variants", "none", "--train-steps", "100", "--quiet", timeout=280,
  )  # fmt: skip
  assert proc.returncode == exit_code, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
  assert len(errors) == 1, proc.stderr[-3000:]
  assert not (out / "serving").exists()
  if exit_code == 2:
    assert "header line is not valid UTF-8" in errors[0]
    return
  summary = load_summary(out)
  assert summary["status"] == "failed"
  assert summary["components"][0]["name"] == "CsvExampleGen"
  assert summary["components"][0]["state"] == "failed"
  assert summary["pushed"] is None
  if case == "nasty_rows":
    # Six malformed rows; the seventh only lacks its label, which is left out, not counted.
    assert "error: 6 of 1804 rows (0.33%) are bad (the first, line " in errors[0]
    assert ") (besides 1 without a label), more than the allowed 0.00%" in errors[0]
    kept = pathlib.Path(errors[0].split("see ")[1].split(" and fix")[0])
    with open(kept, newline="") as f:
      reasons = [r["reason"] for r in csv.DictReader(f)]
    assert len(reasons) == 7 and all(REASON.search(r) for r in reasons)
