"""Mistakes a user makes on the command line: one `error:` line, non-zero exit, nothing written.

Each case runs the real runner (`run_local.py`, and `schedule.py`, `rollback.py` and
`run_kubeflow.py` where they differ) in a subprocess; all of them stop before TensorFlow is
imported, so each takes a second or two.
"""

import gzip
import subprocess

import pytest

from tests.support.cli_runs import REPO_ROOT, run_script


def _run(*args, timeout=120):
  return run_script("run_local.py", *args, timeout=timeout)


def _one_error_line(proc, expected: str, prefix: str = "error: ") -> None:
  assert proc.returncode == 2, proc.stderr[-2000:]
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1, proc.stderr
  assert lines[0].startswith(prefix), lines[0]
  assert expected in lines[0], lines[0]
  assert "Traceback" not in proc.stderr


@pytest.fixture
def data(tmp_path):
  semi = tmp_path / "semi"
  semi.mkdir()
  (semi / "d.csv").write_text("a;b;label\n1;2;0\n3;4;1\n")
  tiny = tmp_path / "tiny"
  tiny.mkdir()
  (tiny / "t.csv").write_text("a,label\n" + "".join(f"{i},{i % 2}\n" for i in range(5)))
  (tmp_path / "afile").write_text("x")
  bom = tmp_path / "bom"
  bom.mkdir()
  (bom / "b.csv").write_bytes(b"\xef\xbb\xbf")
  digits = (REPO_ROOT / "data" / "digits" / "digits.csv").read_bytes()
  truncated = tmp_path / "truncated"
  truncated.mkdir()
  (truncated / "d.csv.gz").write_bytes(gzip.compress(digits)[:3000])
  not_gzip = tmp_path / "notgz"
  not_gzip.mkdir()
  (not_gzip / "d.csv.gz").write_bytes(digits)
  (tmp_path / "schema.pbtxt").write_text("garbage ::: {\n")
  counts = tmp_path / "counts"  # scikit-learn's wine_data.csv: a first line of counts.
  counts.mkdir()
  rows = "".join(
    f"{i}.5,1.7,2.4,15,127,2.8,3.1,.28,2.3,5.6,1.0,3.9,1065,{i % 3}\n" for i in range(99)
  )
  (counts / "w.csv").write_text("178,13,class_0,class_1,class_2\n" + rows)
  alone = tmp_path / "alone"  # The label and nothing to learn it from.
  alone.mkdir()
  (alone / "a.csv").write_text("label\n" + "".join(f"{i % 2}\n" for i in range(300)))
  clash = tmp_path / "clash"  # Two headers the default model would feed as one input.
  clash.mkdir()
  (clash / "c.csv").write_text(
    "kids 5,kids_5,label\n" + "".join(f"{i % 3},{i % 5},{i % 2}\n" for i in range(300))
  )
  module = tmp_path / "mod"
  (module / "helpers.py").mkdir(parents=True)
  (module / "m.py").write_text("def run_fn(fn_args):\n  pass\n")
  return tmp_path


@pytest.mark.parametrize(
  ("args", "expected"),
  [
    (("--output-dir", "{tmp}/afile"), "is a file, not a folder; pass a folder."),
    (("--data-root", "{tmp}/afile"), "--data-root {tmp}/afile is a file, not a folder"),
    (("--min-accuracy", "2"), "--min-accuracy must be between 0 and 1, got 2."),
    (("--max-bad-row-fraction", "5"), "--max-bad-row-fraction must be between 0 and 1, got 5."),
    (("--stale-after", "2 days"), "--stale-after '2 days' is not a duration; pass e.g. 6h"),
    (
      ("--data-root", "{tmp}/alone"),
      "holds no column but the label 'label'; a model needs at least one input column",
    ),
    (("--model-name", "../../evil"), "Invalid model name '../../evil'"),
    (("--output-dir", "{tmp}/o\n* * * * * touch PWNED #"), "contains control characters (\\n)"),
    (("--module-file", "{tmp}/nope.py"), "module file {tmp}/nope.py does not exist"),
    (
      ("--tune", "--module-file", REPO_ROOT / "tests" / "data" / "stock_tfx_module.py"),
      "--tune needs a tuner_fn",
    ),
    (("--data-root", "{tmp}/semi"), "the header looks ';'-delimited, so pass --delimiter ';'"),
    (("--label-key", "nope"), "(65 columns) as --label-key"),
    (("--data-root", "{tmp}/tiny"), "the data has 5 rows, and the eval split gets 1 of them"),
    (
      ("--task", "multiclass", "--max-classes", "3"),
      "over the 3-class cap; pass --task regression",
    ),
    (("--delimiter", ";;"), "--delimiter must be one character"),
    (("--delimiter", "\r"), "--delimiter contains control characters (\\r)"),
    (
      ("--data-root", "{tmp}/counts", "--label-key", "class_2"),
      "w.csv have a different number of fields than its header (5): most have 14; make the",
    ),
    (("--beam-arg", "runner=DataflowRunner"), "'runner=DataflowRunner' is not a Beam option"),
    (("--max-mse", "nan"), "--max-mse must be at least 0, got nan."),
    (("--variant-max-drop", "-1"), "--variant-max-drop must be at least 0, got -1."),
    (("--max-error-increase", "nan"), "--max-error-increase must be at least 0, got nan."),
    (("--hparams", "hiden_units=256"), "unknown hyper-parameter(s) hiden_units (did you mean"),
    (
      ("--hparams", "num_layers=-3"),
      "hyper-parameter num_layers=-3 must be at least 1, e.g. --hparams num_layers=2.",
    ),
    (
      ("--hparams", "hidden_units=abc"),
      "hyper-parameter hidden_units='abc' is not an integer; pass a whole number of at least 1, "
      "e.g. --hparams hidden_units=128.",
    ),
    (("--local-workers", "1000"), "would start 1000 processes on this machine, over its"),
    (("--pipeline-root", "gs://"), "--pipeline-root gs:// names no bucket"),
    (("--exclude-columns", "no_such_column"), "'no_such_column' is not a column of"),
    (
      ("--split-column", "pixel_1"),
      "--split-column 'pixel_1' has 9 values, and a grouped split keeps each value's rows in one "
      "split: that puts about 9 of 1,797 rows in the eval split, fewer than --min-eval-examples "
      "50 (the largest group, '0', has 1,531 rows); split by a column",
    ),
    (
      ("--exclude-columns", "pixel_0,label"),
      "--exclude-columns names the label 'label', which is never a feature (the model learns to "
      "predict it, not from it); leave it out of --exclude-columns.",
    ),
    (("--schema", "{tmp}/schema.pbtxt"), "is not a Schema in text format"),
    (("--data-root", "{tmp}/truncated"), "d.csv.gz is a damaged gzip file"),
    (("--data-root", "{tmp}/notgz"), "d.csv.gz ends in .gz but is not gzip-compressed"),
    (("--data-root", "{tmp}/bom"), "b.csv holds only a byte-order mark; give a CSV file"),
    (("--module-file", "{tmp}/mod/m.py"), "also holds 'helpers.py', which is not a file"),
    (
      ("--data-root", "{tmp}/clash"),
      "columns ['kids 5', 'kids_5'] map to the same model input name; rename one of them in the "
      "CSV header.",
    ),
  ],
  ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_flag_is_one_error_line(data, args, expected):
  tmp = str(data)
  args = [str(a).replace("{tmp}", tmp) for a in args]
  if "--output-dir" not in args:
    args += ["--output-dir", f"{tmp}/out"]
  proc = _run(*args)
  _one_error_line(proc, expected.replace("{tmp}", tmp))
  assert not (data / "out").exists()
  assert not (REPO_ROOT / "PWNED").exists()


@pytest.fixture
def read_only(tmp_path):
  folder = tmp_path / "ro"
  folder.mkdir()
  mounted = subprocess.run(
    ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
    capture_output=True,
    check=False,
  )
  if mounted.returncode != 0:
    pytest.skip("a read-only tmpfs cannot be mounted here (needs root)")
  yield folder
  subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.parametrize("flag", ["--output-dir", "--serving-dir"])
def test_read_only_folder_is_refused_before_the_run(read_only, tmp_path, flag):
  args = [flag, read_only / "x"]
  if flag != "--output-dir":
    args += ["--output-dir", tmp_path / "out"]
  proc = _run(*args)
  _one_error_line(proc, f"{flag} {read_only / 'x'} cannot be written (Read-only file system")
  assert not (tmp_path / "out" / "pipeline_root").exists()


@pytest.mark.parametrize(
  ("args", "expected"),
  [
    (
      ("--trian-steps", "5"),
      "unrecognized arguments: --trian-steps 5; did you mean --train-steps? (see --help)",
    ),
    (("--xyzzy",), "unrecognized arguments: --xyzzy (see --help)"),
    (("--hparams", "a=b=c"), "'a=b=c' is not key=value (e.g. hidden_units=128) (see --help)"),
    (("--train-steps", "x"), "argument --train-steps: invalid int value: 'x' (see --help)"),
  ],
  ids=lambda v: v if isinstance(v, str) else None,
)
def test_flag_the_parser_refuses_is_one_line_without_the_usage_block(tmp_path, args, expected):
  proc = _run(*args, "--output-dir", tmp_path / "out")
  _one_error_line(proc, expected, prefix="run_local.py: error: ")
  assert not (tmp_path / "out").exists()


KUBEFLOW = ("kubeflow", "--cron", "@daily", "--experiment", "e", "--job-name", "j")


@pytest.mark.parametrize(
  ("script", "args", "expected"),
  [
    ("run_kubeflow.py", ("--output", "{tmp}/p.json", "--imgae", "x"), "did you mean --image?"),
    (
      "schedule.py",
      (*KUBEFLOW, "--package", "{tmp}/p.json", "--hots", "h"),
      "unrecognized arguments: --hots h; did you mean --host? (see --help)",
    ),
    (
      "rollback.py",
      ("--serving-dir", "{tmp}", "--model-name", "m", "--list", "--jsn"),
      "unrecognized arguments: --jsn; did you mean --json? (see --help)",
    ),
    # A flag's prefix is a typo too, in a subcommand as well: it wrote the page to x.html.
    (
      "schedule.py",
      ("local", "history", "--serving-dir", "{tmp}", "--model-name", "m", "--htm", "x.html"),
      "unrecognized arguments: --htm x.html; did you mean --html? (see --help)",
    ),
  ],
  ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_mistyped_flag_names_the_closest_one_in_every_runner(tmp_path, script, args, expected):
  proc = run_script(script, *(str(a).replace("{tmp}", str(tmp_path)) for a in args))
  _one_error_line(proc, expected, prefix=f"{script}: error: unrecognized arguments: ")
  assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize(
  ("args", "expected"),
  [
    (
      ("local", "install", "--cron", "@daily", "--output-dir", "{tmp}/o",
       "--crontab-file", "{tmp}"),
      "--crontab-file {tmp} is a folder; pass the crontab file to edit, e.g. --crontab-file "
      "{tmp}/crontab (it is created if missing).",
    ),
    (
      ("local", "list", "--output-dir", "{tmp}/o", "--crontab-file", "{tmp}/nodir/crontab"),
      "--crontab-file {tmp}/nodir/crontab: its folder {tmp}/nodir does not exist; create it or "
      "pass a file in an existing folder.",
    ),
    (
      (*KUBEFLOW, "--package", "{tmp}/notes.json", "--dry-run"),
      "--package {tmp}/notes.json is not valid JSON (Expecting value: line 1 column 1 (char 0)); "
      "pass the .json file pipeline/run_kubeflow.py --output wrote (or a KFP .yaml package), or "
      "--compile instead of --package.",
    ),
    (
      (*KUBEFLOW, "--package", "{tmp}", "--dry-run"),
      "--package {tmp} is a folder; pass the .json file pipeline/run_kubeflow.py --output wrote",
    ),
    (
      (*KUBEFLOW, "--package", "{tmp}/p.json", "--host", "http://127.0.0.1:9"),
      "--package {tmp}/p.json does not exist; compile it first with pipeline/run_kubeflow.py "
      "--output {tmp}/p.json, or pass --compile instead of --package.",
    ),
    (
      (*KUBEFLOW, "--package", "{tmp}/p.yaml", "--host", "http://127.0.0.1:9", "--token-file",
       "{tmp}/token"),
      "--token-file {tmp}/token does not exist; pass a file holding only the KFP bearer token "
      "(e.g. the token file of a service account that may use KFP), or leave --token-file out to "
      "use $KFP_TOKEN or kfp's own credentials.",
    ),
  ],
  ids=lambda v: v if isinstance(v, str) else None,
)  # fmt: skip
def test_schedule_mistakes_are_one_line_naming_the_fix(tmp_path, args, expected):
  (tmp_path / "notes.json").write_text("not json\n")
  (tmp_path / "p.yaml").write_text("pipelineInfo: {name: p}\n")
  proc = run_script("schedule.py", *(str(a).replace("{tmp}", str(tmp_path)) for a in args))
  assert proc.returncode == 1, proc.stderr
  (line,) = proc.stderr.strip().splitlines()
  assert line.startswith(f"schedule.py: error: {expected.replace('{tmp}', str(tmp_path))}"), line
  assert "Traceback" not in proc.stderr
  assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.json", "p.yaml"]


def test_a_damaged_live_version_is_refused_before_the_run(tmp_path):
  from components.serving import publish

  src = tmp_path / "saved"
  (src / "variables").mkdir(parents=True)
  (src / "saved_model.pb").write_bytes(b"pb")
  (src / "variables" / "variables.index").write_bytes(b"index")
  serving = tmp_path / "serving"
  result = publish.push_version(str(serving), "digits", str(src))
  (tmp_path / "serving" / "digits" / "1" / "saved_model.pb").write_bytes(b"damaged")

  proc = _run("--serving-dir", serving, "--output-dir", tmp_path / "out")

  _one_error_line(proc, "live version 1 of 'digits' is damaged (saved_model.pb has sha256")
  assert result.version == 1
  assert not (tmp_path / "out" / "pipeline_root").exists()
