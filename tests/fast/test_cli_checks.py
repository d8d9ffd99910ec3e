"""pipeline.cli's checks and flag parsing: every mistake is one line that names the fix."""

import argparse
import re
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from components.nights import span_notes
from core import defaults, errors
from pipeline.cli import checks, data_checks, flags, resolve, span_checks

MODULE = textwrap.dedent(
  """
  import tensorflow as tf

  def preprocessing_fn(inputs):
    return inputs

  def _helper():
    return None

  async def tuner_fn(fn_args):
    return None

  run_fn = _helper


  class NotAFunction:
    def build_model(self):
      return None
  """
)


def _write(path, text):
  path.write_text(textwrap.dedent(text))
  return str(path)


def test_module_functions_reads_top_level_functions_without_importing(tmp_path):
  module = _write(tmp_path / "module.py", MODULE)
  assert checks.module_functions(module) >= {"preprocessing_fn", "tuner_fn", "run_fn", "_helper"}
  # Methods are not module functions, and the module's imports are never run.
  assert "build_model" not in checks.module_functions(module)


@pytest.mark.parametrize(
  ("name", "content", "message"),
  [
    ("missing.py", None, "does not exist; pass a Python module file"),
    ("folder", "dir", "is not a file"),
    ("broken.py", "def run_fn(:\n", "is not valid Python (line 1)"),
  ],
)
def test_module_functions_errors(tmp_path, name, content, message):
  path = tmp_path / name
  if content == "dir":
    path.mkdir()
  elif content is not None:
    path.write_text(content)
  with pytest.raises(checks.CheckError, match=message.replace("(", r"\(").replace(")", r"\)")):
    checks.module_functions(str(path))


def test_plan_modules_decides_transform_and_tuner(tmp_path):
  module = _write(tmp_path / "module.py", MODULE)
  assert checks.plan_modules(module, None, tune=True) == checks.ModulePlan(True, True)
  plain = _write(tmp_path / "plain.py", "def build_model(hparams):\n  return None\n")
  assert checks.plan_modules(plain, None, tune=False) == checks.ModulePlan(
    False, False, "build_model"
  )
  transform = _write(tmp_path / "transform.py", "def preprocessing_fn(inputs):\n  return inputs\n")
  run_fn = _write(tmp_path / "run.py", "def run_fn(fn_args):\n  return None\n")
  assert checks.plan_modules(run_fn, transform, tune=False).transform is True
  # The bundled module (None) has a tuner_fn.
  assert checks.plan_modules(None, None, tune=True) == checks.ModulePlan(False, True, "default")
  # Files that are not on this machine cannot be read, so they are taken at their word.
  assert checks.plan_modules("gs://bucket/m.py", None, tune=False, local=False).tune is False


def test_plan_modules_errors_name_the_missing_function(tmp_path):
  plain = _write(tmp_path / "plain.py", "def run_fn(fn_args):\n  pass\n")
  with pytest.raises(checks.CheckError) as raised:
    checks.plan_modules(plain, None, tune=True)
  assert str(raised.value) == (
    f"--tune needs a tuner_fn(fn_args) in {plain}; add one or leave out --tune."
  )
  with pytest.raises(checks.CheckError, match=r"--transform-module .* defines no preprocessing_fn"):
    checks.plan_modules(plain, plain, tune=False)
  empty = _write(tmp_path / "empty.py", "x = 1\n")
  with pytest.raises(
    checks.CheckError, match="defines neither run_fn\\(fn_args\\) nor build_model"
  ):
    checks.plan_modules(empty, None, tune=False)
  # The default model reads the raw columns: a Transform's output never reached it (the penguin
  # template's preprocessing.py ended in a false "one value only" of the label).
  transform = _write(tmp_path / "t.py", "def preprocessing_fn(inputs):\n  return inputs\n")
  network = _write(tmp_path / "n.py", "def build_model(hparams):\n  pass\n")
  for module in (None, network):
    with pytest.raises(checks.CheckError, match="leave out --transform-module"):
      checks.plan_modules(module, transform, tune=False)
  assert checks.plan_modules(plain, transform, tune=False).transform


def test_check_writable_on_a_read_only_folder(read_only_folder):
  target = read_only_folder / "out"
  with pytest.raises(checks.CheckError) as raised:
    checks.check_writable("--output-dir", str(target))
  message = str(raised.value)
  assert message.startswith(f"--output-dir {target} cannot be written (")
  assert message.endswith(f"in {read_only_folder}); pass a folder you can write.")


def test_a_read_only_model_folder_in_a_writable_serving_folder_is_refused(read_only_folder):
  serving, model = read_only_folder.parent, read_only_folder.name
  with pytest.raises(checks.CheckError) as raised:
    checks.check_serving_writable("--serving-dir", str(serving), model)
  message = str(raised.value)
  assert message.startswith(
    f"the model folder {read_only_folder} under --serving-dir cannot be written ("
  )
  assert message.endswith("remount it read-write, or pass another --serving-dir.")
  assert "\n" not in message
  with pytest.raises(checks.CheckError, match=f"--serving-dir {read_only_folder} cannot be"):
    checks.check_serving_writable("--serving-dir", str(read_only_folder), "digits")


def test_a_writable_serving_folder_passes_with_or_without_its_model_folder(tmp_path):
  checks.check_serving_writable("--serving-dir", str(tmp_path / "new"), "digits")
  (tmp_path / "serving" / "digits").mkdir(parents=True)
  checks.check_serving_writable("--serving-dir", str(tmp_path / "serving"), "digits")
  assert [p.name for p in (tmp_path / "serving" / "digits").iterdir()] == []
  assert not (tmp_path / "new").exists()
  checks.check_serving_writable("--serving-dir", "s3://bucket/serving", "digits")


def test_check_writable_on_a_file_and_below_a_file(tmp_path):
  checks.check_writable("--output-dir", str(tmp_path / "new" / "deeper"))  # parents may be new
  assert not (tmp_path / "new").exists()  # and the check creates nothing
  target = tmp_path / "a_file"
  target.write_text("x")
  with pytest.raises(checks.CheckError, match="is a file, not a folder; pass a folder"):
    checks.check_writable("--output-dir", str(target))
  with pytest.raises(checks.CheckError, match=f"{target} is a file, not a folder"):
    checks.check_writable("--serving-dir", str(target / "below"))


def test_check_grouped_eval_size_foresees_the_split_of_whole_groups(tmp_path):
  from components.example_gen import csv_split

  def group_in(split: int) -> str:
    plan = csv_split.SplitPlan(("train", "eval"), (4, 1), partition_column="g")
    for i in range(1000):
      cells = pa.RecordBatch.from_arrays([pa.array([f"g{i}".encode()])], ["g"])
      hashes = csv_split.row_hashes(cells, np.ones(1, dtype=bool), "g")
      if csv_split.assign_splits(hashes, plan)[0] == split:
        return f"g{i}"
    raise AssertionError("no value hashed to the split")

  def write(groups):
    path = tmp_path / "d.csv"
    path.write_text("g,x,y\n" + "".join(f"{g},{i},{i % 2}\n" for i, g in enumerate(groups)))
    return [str(path)]

  def check(files, rows, minimum=20):
    data_checks.check_grouped_eval_size(files, "g", ",", (4, 1), rows, minimum)

  # 300 groups of 2 rows: about a fifth of the rows in eval, as without a split column.
  check(write([f"u{i // 2}" for i in range(600)]), 600)
  # One group hashed to eval: the train split would be empty.
  with pytest.raises(checks.CheckError) as raised:
    check(write([group_in(1)] * 200), 200)
  assert str(raised.value) == (
    f"--split-column 'g' has 1 value, and a grouped split keeps each value's rows in one split: "
    f"that puts all 200 rows in the eval split and none in the train split (the largest group, "
    f"'{group_in(1)}', has 200 rows); split by a column with more and smaller groups, or leave "
    "--split-column out."
  )
  # A large group in train and a small one in eval: 40 of 340 rows.
  files = write([group_in(0)] * 300 + [group_in(1)] * 40)
  check(files, 340, minimum=40)
  with pytest.raises(
    checks.CheckError, match=r"puts about 40 of 340 rows in the eval split, fewer "
  ):
    check(files, 340, minimum=41)
  # Empty cells are one group, named as such.
  with pytest.raises(checks.CheckError, match=r"\(the largest group, empty cells, has 300 rows\)"):
    check(write([""] * 300 + [f"u{i}" for i in range(5)]), 305)


def test_check_eval_size_message():
  data_checks.check_eval_size(rows=300, eval_rows=50, eval_share=0.2, min_eval_examples=50)
  with pytest.raises(checks.CheckError) as raised:
    data_checks.check_eval_size(rows=189, eval_rows=25, eval_share=0.2, min_eval_examples=30)
  assert str(raised.value) == (
    "the data has 189 rows, and the eval split gets 25 of them, fewer than "
    "--min-eval-examples 30; add rows (about 25 more) or lower --min-eval-examples."
  )
  # dslabs' polls_us_election_2016: 4,208 polls, 30 of them with an adjpoll_mcmullin.
  with pytest.raises(checks.CheckError) as raised:
    data_checks.check_eval_size(
      rows=30, eval_rows=6, eval_share=0.2, min_eval_examples=20, unlabeled=4178
    )
  assert str(raised.value) == (
    "the data has 30 rows with a label (4,178 more have none), and the eval split gets 6 of "
    "them, fewer than --min-eval-examples 20; add rows with a label (about 70 more) or lower "
    "--min-eval-examples."
  )


def test_eval_rows_are_counted_by_the_split_the_run_makes(tmp_path):
  # The eval split's share of 189 rows is 37.8, but the split by a row's place gives what it
  # gives: the count must be the ExampleGen's (tests/component/test_example_gen.py checks
  # position_split against the executor), and it moves with the file's path under the root.
  folder = tmp_path / "birthwt"
  folder.mkdir()
  (folder / "data.csv").write_text(
    "age,low\n" + "".join(f"{20 + i % 20},{'' if i % 50 == 0 else i % 2}\n" for i in range(189))
  )
  from components.example_gen import csv_profile, csv_split

  files = [str(folder / "data.csv")]
  counted = data_checks.eval_rows(files, str(folder), "low", ",", (4, 1), keep_text_tokens=False)
  plan = csv_split.SplitPlan(("train", "eval"), (4, 1), input_base=str(folder))
  split = csv_profile.position_split(files, "low", plan)
  assert counted == split[1] and sum(split) == 189 - 4
  elsewhere = data_checks.eval_rows(
    files, str(tmp_path), "low", ",", (4, 1), keep_text_tokens=False
  )
  assert elsewhere != counted  # the key is 'birthwt/data.csv' there, not 'data.csv'


def test_span_folders_newer_than_the_newest_read_are_noted_and_leading_zeros_refused(tmp_path):
  """span-3/ made, its copy not finished: the night read span 2 again and said "no new data".
  span-03/ beside span-1/: the checks passed, then the ExampleGen found no 'span-3/*.csv'."""
  for span in (1, 2):
    (tmp_path / f"span-{span}").mkdir()
    (tmp_path / f"span-{span}" / "data.csv").write_text("x\n1\n")
  (tmp_path / "span-3").mkdir()
  (tmp_path / "span-3" / "data.csv.part").write_text("x\n")
  (tmp_path / "span-4").mkdir()
  assert span_notes.empty_span_notes(str(tmp_path), "span-{SPAN}/*.csv") == [
    "span-3/ holds no *.csv file (it holds data.csv.part); the newest span read is 2",
    "span-4/ holds no *.csv file (it is empty); the newest span read is 2",
  ]
  assert span_notes.empty_span_notes(str(tmp_path), "*.csv") == []
  (tmp_path / "span-3" / "data.csv.part").rename(tmp_path / "span-3" / "data.csv")
  assert span_notes.empty_span_notes(str(tmp_path), "span-{SPAN}/*.csv") == [
    "span-4/ holds no *.csv file (it is empty); the newest span read is 3"
  ]
  (tmp_path / "span-05").mkdir()
  (tmp_path / "span-05" / "data.csv").write_text("x\n1\n")
  with pytest.raises(checks.CheckError) as raised:
    span_checks.input_files(str(tmp_path), "span-{SPAN}/*.csv")
  assert str(raised.value) == (
    f"the newest span under {tmp_path} is written with leading zeros (05), and TFX's ExampleGen "
    "reads {SPAN} as 5, so it would find no file; rename the span folders without leading "
    "zeros, or, where every span is written with the same width, give --input-pattern that "
    "width (e.g. 'span-{SPAN:2}/*.csv')."
  )
  padded = tmp_path / "padded"
  for span in ("01", "02"):
    (padded / f"span-{span}").mkdir(parents=True)
    (padded / f"span-{span}" / "data.csv").write_text("x\n1\n")
  assert span_checks.input_files(str(padded), "span-{SPAN:2}/*.csv") == [
    str(padded / "span-02" / "data.csv")
  ]


def test_data_older_than_stale_after_is_noted_by_when_its_span_was_first_read(tmp_path):
  """Four nights without a new span passed as four quiet "no new data" nights."""
  import datetime
  import os

  from components.serving import nights

  serving = str(tmp_path / "serving")
  now = datetime.datetime(2026, 12, 5, 2, tzinfo=datetime.timezone.utc)
  for span in (1, 2):
    (tmp_path / "data" / f"span-{span}").mkdir(parents=True)
    (tmp_path / "data" / f"span-{span}" / "data.csv").write_text("x\n1\n")
  data = str(tmp_path / "data")
  for started, spans in (("2026-12-01T02:00:00Z", [1]), ("2026-12-02T02:00:05Z", [2])):
    nights.append_record(serving, "m", {"night": started, "started": started, "spans": spans})
  nights.append_record(
    serving, "m", {"night": "3", "started": "2026-12-03T02:00:00Z", "spans": [2]}
  )

  def note(pattern, after_s):
    return span_notes.stale_note(data, pattern, serving, "m", after_s, now)

  assert note("span-{SPAN}/*.csv", 2 * 86400) == (
    "no new data for 3.0 days: span 2 was first read 2026-12-02 02:00 UTC"
  )
  assert note("span-{SPAN}/*.csv", 4 * 86400) == ""
  (tmp_path / "data" / "span-3").mkdir()
  (tmp_path / "data" / "span-3" / "data.csv").write_text("x\n1\n")
  assert note("span-{SPAN}/*.csv", 3600) == ""  # Never read before: new tonight.
  # Without spans, the newest file's time.
  old = (now - datetime.timedelta(hours=30)).timestamp()
  os.utime(tmp_path / "data" / "span-3" / "data.csv", (old, old))
  assert note("span-3/*.csv", 86400) == (
    "no new data for 1.2 days: the newest input file was written 2026-12-03 20:00 UTC"
  )


def test_spans_with_files_that_no_night_read_are_named(tmp_path):
  """Span 3 delivered after span 4 was trained: its night said "no new data", and nothing ever
  named span 3."""
  from components.serving import nights

  serving = str(tmp_path / "serving")
  for span in (1, 2, 3, 4):
    (tmp_path / "data" / f"span-{span}").mkdir(parents=True)
    (tmp_path / "data" / f"span-{span}" / "data.csv").write_text("x\n1\n")
  data = str(tmp_path / "data")

  def note(rolling=1):
    return span_notes.unread_span_note(data, "span-{SPAN}/*.csv", serving, "m", rolling)

  assert note() == ""  # No night yet: older spans are history, not a gap.
  for spans in ([1], [2], [4]):
    nights.append_record(serving, "m", {"night": str(spans), "spans": spans})
  assert note() == (
    "span 3 has files that no night read: a night reads the newest 1 span(s) (--rolling-spans), "
    "so a span that came after a newer one, or with it, is never trained; pass --rolling-spans "
    "to read more"
  )
  assert note(rolling=2) == ""  # Tonight reads spans 3 and 4.


def test_input_files_are_the_newest_span_and_version_the_example_gen_reads(tmp_path):
  for name in ["span-9/v7/a.csv", "span-10/v1/a.csv", "span-10/v2/a.csv", "span-10/v2/b.csv"]:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text("x\n1\n")
  assert span_checks.input_files(str(tmp_path), "span-{SPAN}/v{VERSION}/*.csv") == [
    str(tmp_path / "span-10" / "v2" / "a.csv"),
    str(tmp_path / "span-10" / "v2" / "b.csv"),
  ]
  assert span_checks.input_files(str(tmp_path), "span-{SPAN}/*.csv") == []
  (tmp_path / "span-old" / "v1").mkdir(parents=True)
  (tmp_path / "span-old" / "v1" / "a.csv").write_text("x\n1\n")
  with pytest.raises(checks.CheckError) as raised:
    span_checks.input_files(str(tmp_path), "span-{SPAN}/*/*.csv")
  assert str(raised.value).startswith(
    f"cannot resolve the span of 'span-{{SPAN}}/*/*.csv' under {tmp_path} (Cannot find span "
    "number from "
  )
  assert str(raised.value).endswith("; check the data root and the {SPAN} folders.")


@pytest.mark.parametrize(
  ("value", "shown"),
  [("a\nb", "\\n"), ("digits\x1b[31m", "\\x1b"), ("x\u2028y", "\\u2028"), ("tab\there", "\\t")],
)
def test_control_characters_are_refused(value, shown):
  with pytest.raises(checks.CheckError) as raised:
    checks.check_text("--model-name", value)
  assert str(raised.value) == f"--model-name contains control characters ({shown}); remove them."
  assert isinstance(raised.value, errors.UserInputError)
  checks.check_text("--model-name", "plain name, with ünïcode")


def test_simple_flag_checks():
  checks.check_fraction("--max-bad-row-fraction", 0.0)
  with pytest.raises(checks.CheckError, match=r"--min-accuracy must be between 0 and 1, got 1\.5"):
    checks.check_fraction("--min-accuracy", 1.5)
  with pytest.raises(checks.CheckError, match="--train-steps must be at least 1, got 0"):
    checks.check_at_least("--train-steps", 0, 1)
  # NaN compares false with everything, so it must not slip through as "not below".
  with pytest.raises(checks.CheckError, match="--max-mse must be at least 0, got nan"):
    checks.check_at_least("--max-mse", float("nan"), 0)
  with pytest.raises(checks.CheckError, match="--min-accuracy must be between 0 and 1, got nan"):
    checks.check_fraction("--min-accuracy", float("nan"))


def _csv(tmp_path, header, rows):
  path = tmp_path / "data.csv"
  path.write_text(header + "\n" + "".join(f"{r}\n" for r in rows))
  return str(path)


def test_a_label_of_decimal_comma_numbers_is_refused_before_it_becomes_classes(tmp_path):
  # MASS/Boston as a European spreadsheet saves it: ';' between fields, ',' in decimals.
  rows = [f"0,0{i};{20 + i % 7},{i % 10}" for i in range(300)]
  path = _csv(tmp_path, "crim;medv", rows)
  with pytest.raises(checks.CheckError) as raised:
    data_checks.decide_label([path], "medv", ";", "auto", 1000, None, None)
  assert str(raised.value) == (
    "the label 'medv' holds numbers written with a decimal comma ('20,0', '20,1'), which read "
    "as text and would make each value a class; write the file with '.' as the decimal mark "
    "(pandas: pd.read_csv(path, sep=';', decimal=',').to_csv(path, index=False)), or pass "
    "--task multiclass if they are class names."
  )
  as_classes = data_checks.decide_label([path], "medv", ";", "multiclass", 1000, None, None)
  assert as_classes.task == "multiclass"
  # Text that is not all numbers stays a text label.
  text = _csv(tmp_path, "x;size", [f"{i};{'1,5' if i % 2 else 'large'}" for i in range(300)])
  assert data_checks.decide_label([text], "size", ";", "auto", 1000, None, None).task == "binary"


def test_the_task_of_a_label_the_transform_makes_from_a_float_is_asked_for(tmp_path):
  """TFX's taxi module without --task: the float 'tips' read as a regression with a floor of its
  variance (5.6), while the model learned the 0/1 'tips_xf' (MSE 0.24 passed)."""
  path = _csv(tmp_path, "fare,tips", [f"{5 + i % 9}.5,{(i % 7) * 0.75}" for i in range(300)])

  def decide(task, model_label_key="tips_xf"):
    return data_checks.decide_label(
      [path], "tips", ",", task, 1000, None, None, model_label_key=model_label_key
    )

  with pytest.raises(checks.CheckError) as raised:
    decide("auto")
  assert str(raised.value) == (
    "label 'tips_xf' (--eval-label-key) is made by the Transform from the number column "
    "'tips', so whether it is a quantity or classes cannot be read from the data; pass --task "
    "regression, binary or multiclass."
  )
  assert decide("binary").task == "binary"
  assert decide("auto", model_label_key="tips").task == "regression"


@pytest.mark.parametrize("requested", ["auto", "regression"])
def test_a_label_with_thousands_separators_is_named_before_the_class_cap(tmp_path, requested):
  """1,200 prices such as "215,000": over the class cap, and text, so --task regression was
  refused in turn; the values counted before the cap name the cause."""
  rows = [f'{i},"{100_000 + 7 * i:,}"' for i in range(1200)]
  path = _csv(tmp_path, "x,price", rows)
  with pytest.raises(checks.CheckError) as raised:
    data_checks.decide_label([path], "price", ",", requested, 1000, None, None)
  assert str(raised.value) == (
    "the label 'price' holds numbers written with thousands separators ('100,000', '100,007'), "
    "which read as text; write them without the separators (pandas: pd.read_csv(path, "
    "thousands=',').to_csv(path, index=False)), or pass --task multiclass if they are class "
    "names."
  )


@pytest.mark.parametrize(
  ("cells", "shown"),
  [
    (lambda i: f'"${42_000 + 500 * (i % 2):,}"', "'$42,000', '$42,500'"),  # Ecdat's Housing
    (lambda i: f"{i % 3 / 10:.1f}%", "'0.0%', '0.1%'"),  # ggplot2's economics' psavert
  ],
)
def test_a_label_written_with_currency_or_percent_signs_is_refused(tmp_path, cells, shown):
  """Read as text, Housing's "$42,000" prices trained as 219 classes (accuracy 0.04), and
  economics' "12.6%" as 115 (0.0005 short of being pushed)."""
  path = _csv(tmp_path, "x,y", [f"{i},{cells(i)}" for i in range(300)])
  with pytest.raises(checks.CheckError) as raised:
    data_checks.decide_label([path], "y", ",", "auto", 1000, None, None)
  assert str(raised.value) == (
    f"the label 'y' holds numbers written with currency or percent signs ({shown}), which read "
    "as text and would make each value a class; write them as plain numbers (12.5, 42000), or "
    "pass --task multiclass if they are class names."
  )
  as_classes = data_checks.decide_label([path], "y", ",", "multiclass", 1000, None, None)
  assert as_classes.task == "multiclass"


def test_a_header_without_rows_is_named_as_such(tmp_path):
  path = _csv(tmp_path, "x,churn", [])
  with pytest.raises(checks.CheckError) as raised:
    data_checks.decide_label([path], "churn", ",", "auto", 1000, None, None)
  assert str(raised.value) == (
    f"{path} holds a header and no data rows; add rows, or check that whatever writes the data "
    "finished writing it."
  )


def test_decide_label_floor_beats_the_majority_class(tmp_path):
  rows = [f"{i},{'spam' if i % 4 == 0 else 'ham'}" for i in range(200)]
  decision = data_checks.decide_label(
    [_csv(tmp_path, "x,kind", rows)], "kind", ",", "auto", 1000, None, None
  )
  assert decision.task == "binary" and decision.rows == 200
  assert decision.min_accuracy == pytest.approx(0.76)
  assert decision.floor_reason == (
    "auto: accuracy at least 0.76, i.e. 0.01 better than always answering the most frequent "
    "class (0.75 of the rows; --min-accuracy sets another floor)"
  )
  given = data_checks.decide_label(
    [_csv(tmp_path, "x,kind", rows)], "kind", ",", "auto", 1000, 0.9, None
  )
  assert given.min_accuracy == 0.9 and given.floor_reason == "--min-accuracy 0.9"


def test_a_count_label_is_decided_to_be_read_both_ways_with_the_quantitys_ceiling(tmp_path):
  # Visits to a doctor, 0 to 9: classes by the automatic rule, a quantity by the evidence maybe.
  rows = [f"{i},{i % 10}" for i in range(200)]
  path = _csv(tmp_path, "x,visits", rows)
  decision = data_checks.decide_label([path], "visits", ",", "auto", 1000, None, None)
  assert (decision.task, decision.readings) == ("multiclass", True)
  assert decision.quantity_max_mse == pytest.approx(0.99 * 8.25)  # AUTO_MSE_SHARE x variance
  assert decision.task_reason == (
    "10 whole-number values; whole numbers, none below 0, so it is trained both as classes and as "
    "a quantity, and the reading that errs less on held-out rows is kept"
  )
  # --task, or a floor given for classes, keeps one reading.
  given = data_checks.decide_label([path], "visits", ",", "multiclass", 1000, None, None)
  floored = data_checks.decide_label([path], "visits", ",", "auto", 1000, 0.5, None)
  assert not given.readings and not floored.readings and floored.task == "multiclass"
  # A run_fn module trains the classes it is given, under the accuracy floor.
  module = data_checks.decide_label(
    [path], "visits", ",", "auto", 1000, None, None, default_model=False
  )
  assert (module.task, module.readings, module.quantity_max_mse) == ("multiclass", False, None)
  assert module.task_reason == "10 whole-number values"
  assert module.floor_reason.startswith("auto: accuracy at least")


def test_decide_label_with_task_multiclass_counts_a_text_labels_missing_tokens_as_classes(
  tmp_path,
):
  # MASS's survey: Exer is Freq, Some or None (no exercise), which R writes as 'None'.
  rows = [f"{i},{('Freq', 'Some', 'None', 'None')[i % 4]}" for i in range(200)]
  path = _csv(tmp_path, "x,exer", rows)
  auto = data_checks.decide_label([path], "exer", ",", "auto", 1000, None, None)
  assert (auto.task, auto.rows, auto.task_reason) == ("binary", 100, "two label values")
  classes = data_checks.decide_label([path], "exer", ",", "multiclass", 1000, None, None)
  assert (classes.task, classes.rows) == ("multiclass", 200)
  assert classes.task_reason == "--task multiclass"
  assert classes.min_accuracy == pytest.approx(0.51)  # 'None' is half the rows


def test_decide_label_regression_ceiling_from_the_variance(tmp_path):
  values = [0.5 * i for i in range(100)]
  rows = [f"{i},{v}" for i, v in enumerate(values)]
  decision = data_checks.decide_label(
    [_csv(tmp_path, "x,price", rows)], "price", ",", "auto", 1000, None, None
  )
  mean = sum(values) / len(values)
  variance = sum((v - mean) ** 2 for v in values) / len(values)
  assert decision.task == "regression" and decision.min_accuracy == 0.0
  assert decision.max_mse == pytest.approx(defaults.AUTO_MSE_SHARE * variance, rel=0.02)


def test_decide_label_class_cap_is_one_line_naming_column_and_count(tmp_path):
  rows = [f"{i},{chr(97 + i % 10)}" for i in range(100)]
  with pytest.raises(errors.UserInputError) as raised:
    data_checks.decide_label(
      [_csv(tmp_path, "x,species", rows)], "species", ",", "auto", 3, None, None
    )
  message = str(raised.value)
  assert message.startswith("label column 'species' has at least 10 distinct values, over the ")
  assert "3-class cap" in message and "\n" not in message


@pytest.mark.parametrize(
  ("text", "expected"),
  [
    ("hidden_units=128", {"hidden_units": 128}),
    (
      "hidden_units=128, learning_rate=0.01,activation=relu",
      {"hidden_units": 128, "learning_rate": 0.01, "activation": "relu"},
    ),
    ("dropout=1e-1,,", {"dropout": 0.1}),
    ("name= wide ", {"name": "wide"}),
    ("", {}),
  ],
)
def test_hparams_parsing(text, expected):
  parsed = flags._hparams(text)
  assert parsed == expected
  assert {k: type(v) for k, v in parsed.items()} == {k: type(v) for k, v in expected.items()}


@pytest.mark.parametrize("text", ["hidden_units", "=3", "a=1,b"])
def test_hparams_parsing_rejects_parts_without_key_and_value(text):
  with pytest.raises(argparse.ArgumentTypeError, match="is not key=value"):
    flags._hparams(text)


def _args(tmp_path, *argv):
  parser = argparse.ArgumentParser()
  flags.add_pipeline_args(parser)
  return parser.parse_args([str(a) for a in argv])


def test_repeated_hparams_flags_add_up_and_a_later_value_wins(tmp_path):
  args = _args(
    tmp_path,
    "--hparams",
    "learning_rate=0.01,num_layers=2",
    "--hparams",
    "numeric_bins=0",
    "--hparams",
    "num_layers=3",
  )
  assert args.hparams == {"learning_rate": 0.01, "num_layers": 3, "numeric_bins": 0}
  # The default is not shared between parses.
  assert _args(tmp_path).hparams == {}


def test_config_from_args_resolves_task_floor_and_flags(tmp_path):
  rows = [f"{i},{i % 7},{i % 5},{'yes' if i % 3 == 0 else 'no'}" for i in range(300)]
  data = tmp_path / "data"
  data.mkdir()
  (data / "d.csv").write_text("id,x,z,target\n" + "".join(f"{r}\n" for r in rows))
  args = _args(
    tmp_path,
    "--data-root",
    data,
    "--label-key",
    "target",
    "--exclude-columns",
    "id, x",
    "--hparams",
    "hidden_units=16",
    "--optimizer-variants",
    "tflite_float32,onnx",
  )
  config = resolve.config_from_args(args, str(tmp_path / "root"), str(tmp_path / "serving"))
  assert config.task == "binary"
  assert config.min_accuracy == pytest.approx(0.677, abs=1e-3)  # majority 2/3 + 0.01
  assert config.exclude_columns == ("id", "x")
  assert config.hparams == {"hidden_units": 16}
  assert config.optimizer_variants == ("tflite_float32", "onnx")
  assert config.input_pattern == "*.csv"
  assert config.data_root == str(data)
  assert config.pipeline_root == str(tmp_path / "root")


@pytest.mark.parametrize(
  ("flags", "variants", "tensorrt"),
  [
    ((), ("tflite_float32", "tflite_dynamic_range", "tflite_float16", "tflite_int8"), "auto"),
    (("--optimizer-variants", "none"), (), "off"),
    (("--optimizer-variants", "none", "--tensorrt", "required"), (), "required"),
    (("--optimizer-variants", "onnx", "--tensorrt", "off"), ("onnx",), "off"),
  ],
)
def test_no_optimizer_variants_means_no_tensorrt_unless_asked(tmp_path, flags, variants, tensorrt):
  data = tmp_path / "data"
  data.mkdir()
  (data / "d.csv").write_text("x,label\n" + "".join(f"{i},{i % 2}\n" for i in range(300)))
  args = _args(tmp_path, "--data-root", data, *flags)
  config = resolve.config_from_args(args, str(tmp_path / "root"), str(tmp_path / "serving"))
  assert set(config.optimizer_variants) >= set(variants)
  assert (config.optimizer_variants == ()) == (variants == ())
  assert config.tensorrt == tensorrt


@pytest.mark.parametrize("spelling", ["\\t", "tab", "\t"])
def test_a_tab_delimiter_may_be_typed_as_the_hint_prints_it(tmp_path, spelling):
  data = tmp_path / "data"
  data.mkdir()
  rows = "".join(f"{i}\t{i % 3}\t{'a' if i % 2 else 'b'}\n" for i in range(400))
  (data / "d.tsv").write_text("x\tlabel\tkind\n" + rows)
  args = _args(tmp_path, "--data-root", data, "--input-pattern", "*.tsv", "--delimiter", spelling)
  config = resolve.config_from_args(args, str(tmp_path / "root"), str(tmp_path / "serving"))
  assert config.delimiter == "\t"
  assert config.task == "multiclass"


def test_config_from_args_refusals(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  (data / "d.csv").write_text("x,label\n" + "".join(f"{i},{i % 2}\n" for i in range(40)))
  root, serving = str(tmp_path / "root"), str(tmp_path / "serving")
  with pytest.raises(checks.CheckError, match="fewer than --min-eval-examples 50"):
    resolve.config_from_args(_args(tmp_path, "--data-root", data), root, serving)
  with pytest.raises(checks.CheckError, match="--eval-label-key names a label made by a Transform"):
    resolve.config_from_args(
      _args(tmp_path, "--data-root", data, "--eval-label-key", "label_xf"), root, serving
    )
  for delimiter in (";;", '"'):
    with pytest.raises(checks.CheckError, match="--delimiter must be one character"):
      resolve.config_from_args(
        _args(tmp_path, "--data-root", data, "--delimiter", delimiter), root, serving
      )
  with pytest.raises(checks.CheckError, match="control characters"):
    resolve.config_from_args(
      _args(tmp_path, "--data-root", data, "--delimiter", "\r"), root, serving
    )
  with pytest.raises(checks.CheckError, match="pass --task binary, multiclass or regression"):
    resolve.config_from_args(
      _args(tmp_path, "--data-root", "gs://bucket/data"), root, serving, local_paths=False
    )


def test_a_csv_file_given_as_the_data_root_names_its_folder(tmp_path):
  csv = tmp_path / "rows.csv"
  csv.write_text("a,label\n1,0\n")
  message = f"--data-root {csv} is a CSV file, not a folder; pass the folder that holds it "
  message += f"({tmp_path}): the run reads every CSV file in it."
  with pytest.raises(checks.CheckError, match=re.escape(message)):
    checks.check_folder("--data-root", str(csv), must_exist=True)
  other = tmp_path / "notes.txt"
  other.write_text("x")
  with pytest.raises(checks.CheckError, match=r"is a file, not a folder; pass a folder\.$"):
    checks.check_folder("--data-root", str(other), must_exist=True)


def test_a_run_fn_modules_text_label_is_refused_before_the_run_unless_the_model_names_its_own(
  tmp_path,
):
  """TFMA scores a run_fn module's model against the label as the examples hold it: a text
  label failed deep in the Evaluator's Beam pipeline ("Cast string to float"), after the
  Transform and the training had run. Given the transformed label's name, the run goes on."""
  data = tmp_path / "data"
  data.mkdir()
  names = ("setosa", "versicolor", "virginica")
  (data / "d.csv").write_text("x,species\n" + "".join(f"{i},{names[i % 3]}\n" for i in range(300)))
  module = _write(tmp_path / "module.py", MODULE)
  flags_ = ("--data-root", data, "--module-file", module, "--label-key", "species")
  root, serving = str(tmp_path / "root"), str(tmp_path / "serving")
  with pytest.raises(errors.UserInputError, match=r"label 'species' is text.*--eval-label-key"):
    resolve.config_from_args(_args(tmp_path, *flags_), root, serving)
  config = resolve.config_from_args(
    _args(tmp_path, *flags_, "--eval-label-key", "species_xf", "--task", "multiclass"),
    root,
    serving,
  )
  assert (config.label_key, config.model_label_key) == ("species", "species_xf")
  # The default model reads a text label as class indices itself.
  config = resolve.config_from_args(_args(tmp_path, *flags_[:2], *flags_[4:]), root, serving)
  assert config.task == "multiclass"


def test_tonights_file_without_the_live_versions_label_asks_to_fix_the_data(tmp_path):
  """A night whose file lost the label column was told to pass another --label-key."""
  path = _csv(tmp_path, "tenure,charges", ["1,2.5", "3,4.5"])
  with pytest.raises(checks.CheckError) as raised:
    data_checks.check_label_kept(path, ",", "churn", ["tenure", "charges", "churn"], 3)
  assert str(raised.value) == (
    f"column 'churn', the label live version 3 was trained on, is not in the header of {path}: "
    "the data lost it; fix what writes the data (a model of another label is a new model: pass "
    "--label-key and another --model-name)."
  )
  # Nothing live, or a live version of another label: the column check names the columns.
  data_checks.check_label_kept(path, ",", "churn", None, 3)
  data_checks.check_label_kept(path, ",", "churn", ["tenure", "target"], 3)


def test_a_module_that_imports_a_package_this_environment_lacks_is_refused_before_the_run(
  tmp_path,
):
  """TFX's penguin_utils_tfdf_experimental.py failed in the trainer (rc 1), after the data steps,
  for want of tensorflow_decision_forests."""
  module = _write(
    tmp_path / "m.py",
    "import os\nimport helpers\nfrom no_such_package_here.sub import x\n\ndef run_fn(fn_args):\n"
    "  pass\n",
  )
  _write(tmp_path / "helpers.py", "X = 1\n")  # A sibling, packaged with the module.
  with pytest.raises(checks.CheckError) as raised:
    checks.check_module_imports("--module-file", module)
  assert str(raised.value) == (
    f"--module-file {module} imports 'no_such_package_here.sub' (line 3), which is not "
    "installed here; install the package that provides it into this environment, or remove "
    "the import."
  )
  # An import the module guards itself (try, if, inside a function) is its own affair.
  guarded = _write(
    tmp_path / "g.py",
    "try:\n  import no_such_package_here\nexcept ImportError:\n  pass\n\n"
    "def run_fn(fn_args):\n  import no_such_package_here\n",
  )
  checks.check_module_imports("--module-file", guarded)
