"""The report pages on small hand-built inputs: real statistics protos, real summary dicts."""

import itertools
import json
import pathlib
import re

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
    "live_version": 1,
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
  assert [facts[f"night.{i}.live_version"] for i in range(3)] == [1, 1, 1]
  assert [facts[f"night.{i}.drift"] for i in range(3)] == ["-", "age 0.3 (bound 0.1)", "-"]


def test_the_nights_table_lists_each_accepted_column_once_and_the_largest_drift():
  night = _night(1, "pushed", 0.7, {"trip_miles": {"value": 0.31, "threshold": 0.1}})
  night["gate"]["passed"] = True
  night["gate"]["findings"] = [
    {"column": "trip_miles", "kind": "stop", "accepted": True},
    {"column": "trip_miles", "kind": "stop", "accepted": True},
  ]
  night["gate"]["drift"]["fare"] = {"value": 0.5, "threshold": 1.0}  # Larger, but half its bound.
  html = nights_page.render_nights_page([night], "taxi", "/s", {})
  facts = {k: json.loads(v) for k, v in browser.facts(html).items()}
  assert facts["night.0.gate"] == "passed (accepted trip_miles)"
  assert facts["night.0.drift"] == "trip_miles 0.31 (bound 0.1)"
  assert "<th>largest drift</th>" in html and "<th>live version</th>" in html


def _stroke_styles(svg):
  return [m for m in re.findall(r'style="([^"]*)"', svg) if "fill: none" in m and "stroke: #" in m]


def test_the_drift_bound_is_a_labelled_dotted_line_no_column_shares(tmp_path):
  drift = {f"c{j}": {"value": 0.1 * (j + 1), "threshold": 1.0} for j in range(10)}
  html = nights_page.render_nights_page(
    [_night(i, "pushed", 0.7, drift) for i in (1, 2)], "m", "/s", {}
  )
  svg = html[html.index('data-chart="nights-drift"') :]
  svg = svg[svg.index("<svg") : svg.index("</svg>")]
  bound = [m for m in _stroke_styles(svg) if f"stroke: {charts.BOUND_COLOR}" in m]
  assert bound and all("stroke-dasharray" in m for m in bound)  # Drawn and in the legend.
  columns = [m for m in _stroke_styles(svg) if "stroke-width: 1.5" in m]
  assert len({m for m in columns}) == nights_page.DRIFT_COLUMNS
  assert not any(charts.BOUND_COLOR in m or "stroke-dasharray" in m for m in columns)
  assert svg.count(">bound (drift = threshold)</text>") == 2  # At the line's end and the legend.


def test_night_labels_fit_the_chart_upright_with_their_year():
  import matplotlib
  from matplotlib.backends.backend_agg import FigureCanvasAgg

  labels = [f"2026-12-{d:02d} 22:15" for d in range(1, 31)]
  with matplotlib.rc_context(charts._RC):
    fig = charts._nights_lines_figure(labels, {"a": [0.5] * 30}, "x", (), None)
    renderer = FigureCanvasAgg(fig).get_renderer()
    ticks = fig.axes[0].get_xticklabels()
    boxes = [t.get_window_extent(renderer) for t in ticks]
  assert ticks[0].get_text() == "2026-12-01\n22:15" and 6 <= len(ticks) <= 12
  for box in boxes:  # Inside the figure: the first label used to lose its year off the edge.
    assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= fig.bbox.width, box
  for left, right in itertools.pairwise(boxes):
    assert left.x1 < right.x0  # Side by side, not overlapping.


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
