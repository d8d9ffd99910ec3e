"""The report pages of real runs, opened in Debian's chromium, headless and offline.

The default digits run (the session's shared run) gets its page checked against its
run_summary.json; a second night in a copy of its output folder fails in the ExampleGen, and
its page and the nights page (two nights, each linking to its run's page) are checked too.
UPDATE_SCREENSHOT=1 copies the default run's screenshot to docs/report.png.
"""

import json
import os
import shutil

import pytest

from components.report import nights_page, run_page
from tests.support import browser
from tests.support.cli_runs import REPO_ROOT, load_summary, run_script

pytestmark = pytest.mark.e2e

SCREENSHOT = REPO_ROOT / "docs" / "report.png"


@pytest.fixture(autouse=True)
def _chromium():
  if browser.chromium() is None:
    if os.environ.get("CI"):
      pytest.fail("chromium is not installed; .ci/run installs it (apt-get install -y chromium)")
    pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run does it in CI)")


@pytest.fixture(scope="module")
def failed_night(digits_run, tmp_path_factory):
  """A second night in a copy of the digits run's output folder, on a CSV with a bad row."""
  root = tmp_path_factory.mktemp("failed_night")
  out = root / "out"
  shutil.copytree(digits_run.out, out, ignore=shutil.ignore_patterns(".run.lock"))
  data = root / "data"
  data.mkdir()
  rows = "".join(f"{i % 7},{i % 10}\n" for i in range(50))
  (data / "d.csv").write_text("x,label\n" + rows + "3,4,5\n")
  proc = run_script(
    "run_local.py", "--data-root", data, "--output-dir", out, "--model-name", "digits",
    "--min-eval-examples", "5", "--quiet", timeout=300, warm=True,
  )  # fmt: skip
  assert proc.returncode == 1, proc.stderr[-3000:]
  return out, proc


def _open(page, tmp_path, name):
  opened = browser.open_page(page)
  assert opened.console == [], opened.console
  browser.screenshot(page, tmp_path / f"{name}.png")
  return opened, {k: json.loads(v) for k, v in browser.facts(opened.dom).items()}


def _assert_every_chart_drew(dom, expected):
  drawn = browser.charts_drawn(dom)
  assert expected <= set(drawn), sorted(set(drawn))
  assert [name for name, elements in drawn.items() if not elements] == []


def test_the_default_runs_page_shows_its_summary_in_a_browser(digits_run, tmp_path):
  summary = digits_run.summary
  page = digits_run.out / run_page.RUN_PAGE
  # `make run` ends with the page's path (rich may wrap the line).
  tail = "".join(digits_run.stdout.strip().splitlines()[-3:])
  assert f"report: {page}" in tail
  opened, facts = _open(page, tmp_path, "report")
  columns = {f"column:{c}" for c in ["label", *(f"pixel_{i}" for i in range(64))]}
  _assert_every_chart_drew(opened.dom, {"epochs", "confusion", "variants", *columns})
  assert facts["status"] == summary["status"] == "succeeded"
  assert facts["seconds"] == summary["seconds"]
  for c in summary["components"]:
    assert facts[f"component.{c['name']}.state"] == c["state"]
    assert facts[f"component.{c['name']}.seconds"] == c["seconds"]
  assert facts["pushed.version"] == summary["pushed"]["version"] == 1
  assert facts["blessed"] is summary["blessed"] is True
  accuracy = summary["eval_metrics"]["sparse_categorical_accuracy"]
  assert facts["metric.sparse_categorical_accuracy"] == accuracy
  assert facts["metric.example_count"] == summary["eval_metrics"]["example_count"]
  examples = summary["artifacts"]["examples"]["properties"]
  assert facts["rows.train"] == examples["num_rows_train"] == summary["night"]["rows"]["train"]
  assert facts["rows.eval"] == examples["num_rows_eval"] == summary["night"]["rows"]["eval"]
  plan = summary["training_plan"]
  assert facts["training.epochs_run"] == plan["epochs_run"]
  assert facts["training.best_epoch"] == plan["best_epoch"]
  # The digits' ensemble has a linear member, and the page shows the share chosen for it.
  assert facts["training.linear_share"] == plan["linear"]["share"]
  for v in summary["optimizer"]["variants"]:
    assert facts[f"variant.{v['name']}.blessed"] is bool(v["blessed"])
  assert "sha256" in opened.dom and "curl -s http://localhost:8501/v1/models/digits:predict" in (
    opened.dom
  )
  if os.environ.get("UPDATE_SCREENSHOT"):
    shutil.copyfile(tmp_path / "report.png", SCREENSHOT)


def test_a_failed_nights_page_and_the_nights_page(failed_night, tmp_path):
  out, proc = failed_night
  summary = load_summary(out)
  assert summary["status"] == "failed"
  opened, facts = _open(out / run_page.RUN_PAGE, tmp_path, "failed")
  assert facts["status"] == "failed" and facts["error"] == summary["error"]
  assert facts["component.CsvExampleGen.state"] == "failed"
  assert f"error: {facts['error']}" in proc.stderr
  assert browser.charts_drawn(opened.dom) == {}
  nights, facts = _open(out / nights_page.NIGHTS_PAGE, tmp_path, "nights")
  _assert_every_chart_drew(nights.dom, {"nights-metric", "nights-rows"})
  assert facts["nights.count"] == 2
  assert [facts["night.0.outcome"], facts["night.1.outcome"]] == ["pushed", "failed"]
  assert facts["night.0.rows.train"] == summary_rows(out)
  links = [line for line in nights.dom.split('href="')[1:] if line.startswith("reports/")]
  assert len(links) == 2
  for link in links:
    assert (out / link.split('"')[0]).is_file()


def summary_rows(out):
  """The first night's train rows, as its own kept run page states them."""
  first = sorted((out / run_page.RUN_PAGES_DIR).glob("*.html"))[0]
  facts = browser.facts(first.read_text())
  return json.loads(facts["rows.train"])
