"""Artifact types written by the Optimizer component."""

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
