"""RunReport's construction and its executor's page location."""

import json

import pytest
from tfx.types import channel_utils, standard_artifacts

from components import artifacts
from components.report import executor
from components.report import spec as report_spec
from components.report.component import RunReport
from core import sources


def test_report_step_wires_its_optional_inputs_and_one_html_output():
  pushed = channel_utils.as_channel([standard_artifacts.PushedModel()])
  step = RunReport(
    run_config={"pipeline_name": "digits"},
    pushed_model=pushed,
    **{sources.STATISTICS: None},
  )
  assert set(step.inputs) == {report_spec.PUSHED_MODEL_KEY}
  assert step.outputs[report_spec.PAGE_KEY].type is artifacts.HtmlReport
  assert json.loads(step.exec_properties[report_spec.RUN_CONFIG_KEY]) == {"pipeline_name": "digits"}
  with pytest.raises(TypeError, match="no input 'pushed'"):
    RunReport(run_config={}, pushed=pushed)


def test_the_page_is_the_uri_itself_or_index_html_in_a_folder(tmp_path):
  assert executor.page_path(str(tmp_path / "page")) == str(tmp_path / "page")
  (tmp_path / "made").mkdir()  # LocalDagRunner makes an output's uri a folder.
  assert executor.page_path(str(tmp_path / "made")) == str(tmp_path / "made" / "index.html")


def test_a_page_that_cannot_be_drawn_is_still_written_and_says_why(tmp_path, monkeypatch):
  from components.report import run_page

  def broken(summary):
    raise KeyError("strategy")

  monkeypatch.setattr(run_page, "render_run_page", broken)
  page = artifacts.HtmlReport()
  page.uri = str(tmp_path / "page")
  executor.Executor().Do({}, {report_spec.PAGE_KEY: [page]}, {report_spec.RUN_CONFIG_KEY: "{}"})
  text = executor.read_page(page.uri)
  assert "could not be drawn" in text and "KeyError: &#x27;strategy&#x27;" in text
