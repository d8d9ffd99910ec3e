"""RunReport's executor: the run's facts from its input artifacts, then the page."""

from __future__ import annotations

import json
import logging
import posixpath
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils

from components.nights import nights_lib
from components.report import facts, run_page
from components.report import page as page_lib
from components.report import spec as s
from core import sources

_LOG = logging.getLogger(__name__)
# Where the page goes when the orchestrator made the output's uri a folder.
INDEX_FILE = "index.html"


class Executor(base_executor.BaseExecutor):
  """Builds the page's summary from the inputs (as `pipeline/cli/summary.py` does from ML
  Metadata) and writes the page at the output's uri."""

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    page = artifact_utils.get_single_instance(output_dict[s.PAGE_KEY])
    path = page_path(page.uri)
    try:
      summary = summary_from_inputs(
        input_dict,
        json.loads(exec_properties[s.RUN_CONFIG_KEY]),
        nights_lib.night_id(exec_properties),
      )
      text = run_page.render_run_page(summary)
    except Exception as e:  # As locally: the page never fails a run that pushed.
      _LOG.exception("The report page could not be drawn")
      text = page_lib.document(
        "The report page could not be drawn",
        "",
        (),
        page_lib.Html(f"<p>{page_lib.esc(f'{type(e).__name__}: {e}')}</p>"),
      )
    fileio.makedirs(posixpath.dirname(path))
    with fileio.open(path, "w") as f:
      f.write(text)
    _LOG.info("Report page written: %s (%d bytes)", path, len(text))


def page_path(uri: str) -> str:
  """The page's file: the uri itself (KFP), or index.html in it where it is a folder."""
  return posixpath.join(uri, INDEX_FILE) if fileio.isdir(uri) else uri


def _one(input_dict: dict[str, list[types.Artifact]], key: str) -> types.Artifact | None:
  artifacts = input_dict.get(key) or []
  return artifacts[0] if artifacts else None


def summary_from_inputs(
  input_dict: dict[str, list[types.Artifact]], run_config: dict[str, Any], night: str | None = None
) -> dict[str, Any]:
  """The run_summary.json the page reads, from the step's inputs.

  The step runs after the Pusher, so every step before it succeeded; their states and times are
  the orchestrator's (the KFP run graph), not the page's.
  """

  def getter(key: str) -> facts.Getter | None:
    artifact = _one(input_dict, key)
    return None if artifact is None else facts.tfx_getter(artifact)

  def uri(key: str) -> str | None:
    artifact = _one(input_dict, key)
    return None if artifact is None else artifact.uri

  summary = facts.summary_of(
    status="succeeded",
    error=None,
    components=[],
    model=getter(s.MODEL_KEY),
    blessing=getter(s.BLESSING_KEY),
    evaluation_uri=uri(sources.EVALUATION),
    report_uri=uri(s.OPTIMIZATION_REPORT_KEY),
    pushed=getter(s.PUSHED_MODEL_KEY),
  )
  summary["components_note"] = "the steps' states and times are in the Kubeflow run's graph"
  summary["config"] = run_config
  summary["night"] = {"night": night} if night else None
  summary[sources.ARTIFACTS] = {
    role: sources.pointer(
      artifact.uri, artifact.mlmd_artifact.custom_properties, facts.tfx_getter(artifact)
    )
    for role in sources.ROLES
    if (artifact := _one(input_dict, role)) is not None
  }
  return summary


def read_page(uri: str) -> str:
  """The page an output artifact holds (for tests and tools)."""
  with fileio.open(page_path(uri), "r") as f:
    return f.read()
