"""RunReport component: the run's report page as an HTML artifact (Kubeflow's visualization)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec

from components import artifacts
from components.report import executor
from components.report import spec as s


class RunReport(base_component.BaseComponent):
  """Writes the same page `run_local.py` writes beside run_summary.json, from its inputs.

  On Kubeflow there is no run_summary.json: this step, after the Pusher, reads the artifacts
  the page shows and writes the page as its `page` output, which the compiled package declares
  as a `system.HTML` artifact so the KFP UI shows it (`kubeflow_package`).

  Example:
    report = RunReport(run_config={"pipeline_name": "digits"},
                       pushed_model=pusher.outputs["pushed_model"], ...)
  """

  SPEC_CLASS = s.RunReportSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(self, run_config: Mapping[str, Any], **inputs: types.BaseChannel | None):
    """Wires the report step.

    Args:
      run_config: facts about the run the page shows (pipeline_name, data_root, label_key,
        task, model_name, serving_dir, pipeline_root); plain JSON values.
      **inputs: channels by `RunReportSpec.INPUTS` key; each is optional.

    Raises:
      TypeError: for an input key the spec does not have.
    """
    unknown = sorted(set(inputs) - set(s.RunReportSpec.INPUTS))
    if unknown:
      raise TypeError(
        f"RunReport has no input {unknown[0]!r}; pass {sorted(s.RunReportSpec.INPUTS)}"
      )
    super().__init__(
      spec=s.RunReportSpec(
        run_config=json.dumps(dict(run_config), sort_keys=True, default=str),
        page=types.Channel(type=artifacts.HtmlReport),
        **{k: v for k, v in inputs.items() if v is not None},
      )
    )
