"""The kit's own artifact types: the Optimizer's outputs and the report page.

One home, as `tfx/types/standard_artifacts.py` is for TFX's, because several steps declare
channels of them (the Optimizer writes OptimizedModel and OptimizationReport; the Pusher and
RunReport read them). Kubeflow v2 containers import an artifact class from its TYPE_NAME, so
`components/__init__.py` exports these under `components.<TYPE_NAME's last part>`.
"""

from tfx import types


class OptimizedModel(types.Artifact):
  """Optimized variants of a model, one sub-folder per variant.

  Custom properties (set by the Optimizer executor, read by a Pusher):
    blessed_variants: JSON list of the names of the blessed variants.
    <variant>_blessed: 1 if that variant passed the accuracy gate, else 0.
    <variant>_status: "ok", "failed" or "skipped".
    <variant>_path: the variant's model file relative to the artifact uri.
  """

  TYPE_NAME = "components.OptimizedModel"


class OptimizationReport(types.Artifact):
  """The Optimizer's measurements: report.json, report.md and report.png."""

  TYPE_NAME = "components.OptimizationReport"


class HtmlReport(types.Artifact):
  """A report page: its uri is the HTML file itself (as KFP's `system.HTML` artifacts are), or a
  folder holding `index.html` where the orchestrator made the uri a folder (LocalDagRunner)."""

  TYPE_NAME = "components.HtmlReport"
