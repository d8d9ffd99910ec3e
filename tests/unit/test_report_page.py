"""The report pages on small hand-built inputs: real statistics protos, real summary dicts."""

import json
import pathlib

from components.report import charts, nights_page, page, run_page
from tests.support import browser, report_inputs


def test_text_from_a_run_is_escaped_and_markup_passes_only_when_built_here():
  assert page.esc("<b>&") == "&lt;b&gt;&amp;"
  assert page.esc(None) == "-"
  cell = page.table(["a<"], [["<i>", page.Html("<i>ok</i>")]])
  assert "<th>a&lt;</th>" in cell and "<td>&lt;i&gt;</td>" in cell and "<td><i>ok</i></td>" in cell


def test_a_fact_holds_its_exact_value_as_json():
  html = page.fact("metric.auc", 0.123456789)
  assert browser.facts(html) == {"metric.auc": "0.123456789"}
  assert ">0.1235<" in html


def test_a_succeeded_run_shows_every_section_with_its_figures(tmp_path):
  summary = report_inputs.write_run(tmp_path)
  html = run_page.render_run_page(summary)
  for anchor in ("run", "data", "training", "evaluation", "optimizer", "push"):
    assert f'<section id="{anchor}">' in html
  facts = {k: json.loads(v) for k, v in browser.facts(html).items()}
  assert facts["status"] == "succeeded" and facts["seconds"] == 12.5
  assert facts["component.Pusher.state"] == "cached"
  assert facts["rows.train"] == 90 and facts["rows.eval"] == 10 and facts["quarantined"] == 1
  assert facts["training.best_epoch"] == 3 and facts["metric.binary_accuracy"] == 0.7
  assert facts["blessed"] is True and facts["pushed.pushed"] is False
  assert facts["variant.tflite_int8.blessed"] is True
  assert facts["variant.pruned.blessed"] is False
  drawn = browser.charts_drawn(html)
  assert set(drawn) == {"column:age", "column:plan<b>", "epochs", "confusion", "variants"}
  assert all(drawn.values()), drawn
  # The live version's training data, the drift, the quarantined row and the gate's reason.
  assert "0.05 of 0.1" in html and "not a number: &lt;x&gt;" in html
  assert "accuracy dropped 0.2" in html and "&lt;no onnxruntime&gt;" in html
  assert "<script" not in html and "<link" not in html and "http://" not in html.split("<main>")[0]


def test_an_ensembles_training_section_lists_each_network_and_names_the_chart(tmp_path):
  summary = report_inputs.write_run(tmp_path)
  summary["training_plan"]["members"] = [
    {"epochs_run": 5, "best_epoch": 3},
    {"epochs_run": 7, "best_epoch": None},
  ]
  html = run_page.render_run_page(summary)
  assert "<th>each of 2 networks: epochs run / kept</th><td>5 / 3, 7 / -</td>" in html
  assert "(the first of 2 networks)" in html
  assert "<th>warm start</th>" not in html
  summary["training_plan"]["warm_start"] = "4 of 9 layers with weights copied"
  html = run_page.render_run_page(summary)
  assert "<th>warm start</th><td>4 of 9 layers with weights copied</td>" in html


def test_the_run_section_says_why_the_label_reads_as_its_task(tmp_path):
  summary = report_inputs.write_run(tmp_path)
  assert "<th>task</th><td>binary</td>" in run_page.render_run_page(summary)
  summary["config"]["task_reason"] = "two label values"
  assert "<th>task</th><td>binary (two label values)</td>" in run_page.render_run_page(summary)


def test_the_data_section_counts_rows_without_a_label_and_names_their_tokens(tmp_path):
  summary = report_inputs.write_run(tmp_path)
  assert "without a label" not in run_page.render_run_page(summary)
  examples = summary["artifacts"]["examples"]["properties"]
  examples.update(num_bad_rows=12, num_unlabeled_rows=11, unlabeled_label_tokens='{"NA": 11}')
  html = run_page.render_run_page(summary)
  assert browser.facts(html)["unlabeled"] == "11"
  assert "<th>of them without a label</th><td>" in html.replace(
    '<span class="fact" data-fact="unlabeled" data-value="11">', ""
  )
  assert "11 (label NA in 11 rows; --task multiclass learns it as a class)" in html


def test_a_failed_run_gets_a_page_that_says_what_did_not_run(tmp_path):
  html = run_page.render_run_page(report_inputs.failed_run())
  assert "<script>" not in html
  assert "column &lt;script&gt;alert(1)&lt;/script&gt; is not a number" in html
  assert json.loads(browser.facts(html)["component.CsvExampleGen.state"]) == "failed"
  for said in ("StatisticsGen did not run", "trainer did not finish", "Evaluator did not run"):
    assert said in html
  assert browser.charts_drawn(html) == {}


def test_the_page_is_written_whole_beside_the_summary_with_the_nights_copy(tmp_path):
  summary = report_inputs.write_run(tmp_path / "run")
  (tmp_path / run_page.SUMMARY_FILE).write_text(json.dumps(summary))
  path = run_page.write_run_page(str(tmp_path))
  assert path == str(tmp_path / run_page.RUN_PAGE)
  kept = run_page.run_page_of(str(tmp_path), summary["night"]["night"])
  assert pathlib.Path(kept).read_text() == pathlib.Path(path).read_text()
  assert not list(tmp_path.glob("*.tmp"))


def _night(i, outcome, accuracy, drift=None, rows=100):
  return {
    "night": f"2026-01-0{i}T000000Z-n{i}",
    "started": f"2026-01-0{i}T00:00:00Z",
    "outcome": outcome,
    "spans": [i],
    "rows": {"train": rows, "eval": rows // 4},
    "metrics": {"candidate": {"binary_accuracy": accuracy}, "baseline": {"binary_accuracy": 0.6}},
    "gate": {"compared": drift is not None, "drift": drift or {}},
    "version": i if outcome == "pushed" else None,
    "line": f"{outcome} <night {i}>",
  }


def test_the_nights_page_draws_metric_rows_and_drift_and_links_the_kept_run_pages(tmp_path):
  records = [
    _night(1, "pushed", 0.7),
    _night(2, "stopped", 0.5, {"age": {"value": 0.3, "threshold": 0.1}}, rows=80),
    _night(3, "failed", None),
  ]
  run_page.write_page(run_page.run_page_of(str(tmp_path), records[0]["night"]), "<html></html>")
  path = nights_page.write_nights_page(
    str(tmp_path / nights_page.NIGHTS_PAGE), records, "churn", "/s", str(tmp_path)
  )
  html = pathlib.Path(path).read_text()
  drawn = browser.charts_drawn(html)
  assert set(drawn) == {"nights-metric", "nights-rows", "nights-drift"} and all(drawn.values())
  facts = {k: json.loads(v) for k, v in browser.facts(html).items()}
  assert facts["nights.count"] == 3 and facts["nights.stopped"] == 1
  assert [facts[f"night.{i}.outcome"] for i in range(3)] == ["pushed", "stopped", "failed"]
  assert facts["night.1.rows.train"] == 80
  assert html.count('href="reports/') == 1 and "&lt;night 2&gt;" in html


def test_every_chart_is_an_inline_svg_element():
  svg = charts.histogram([([0, 1, 2], [0.5, 0.5], charts.TRAIN, True)])
  assert charts.is_svg(svg) and "<?xml" not in svg
  assert charts.is_svg(charts.confusion([[1, 0], [0, 1]], ["a", "b"]))
  assert charts.is_svg(charts.predicted_vs_actual([1.0, 2.0], [1.1, 1.9]))


def test_history_html_naming_a_folder_or_an_unwritable_place_is_one_line(tmp_path):
  import pytest

  from core.errors import UserInputError
  from pipeline.cli import nights as nights_cli

  serving = tmp_path / "serving"
  (serving / "churn").mkdir(parents=True)
  with pytest.raises(
    UserInputError, match=r"is a folder; pass the page's file, e\.g\. .*nights\.html"
  ):
    nights_cli.write_html(str(serving), "churn", str(tmp_path))
  blocker = tmp_path / "a-file"
  blocker.write_text("not a folder")
  with pytest.raises(UserInputError, match=r"cannot write the nights page .* --html a path"):
    nights_cli.write_html(str(serving), "churn", str(blocker / "nights.html"))
  assert blocker.read_text() == "not a folder"
  written = nights_cli.write_html(str(serving), "churn", str(tmp_path / "pages" / "nights.html"))
  assert pathlib.Path(written).read_text().startswith("<!DOCTYPE html>")
