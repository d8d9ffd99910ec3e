"""RunReport's spec: the run's report page as one HTML file (an `artifacts.HtmlReport`)."""

from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from components import artifacts
from core import properties, sources

# The page's inputs are the roles run_summary.json points at (`sources`), plus the artifacts the
# local summary reads its facts from (the trained model, the blessing, the Optimizer's report,
# the push).
MODEL_KEY = "model"
BLESSING_KEY = "blessing"
OPTIMIZATION_REPORT_KEY = "optimization_report"
PUSHED_MODEL_KEY = "pushed_model"
PAGE_KEY = "page"
# Run facts the page shows (JSON: pipeline name, data, label, task, serving folder, ...).
RUN_CONFIG_KEY = "run_config"


class RunReportSpec(ComponentSpec):
  """Spec of RunReport: every input optional, so a pipeline without a step still has a page."""

  PARAMETERS = {
    RUN_CONFIG_KEY: ExecutionParameter(type=str),
    properties.NIGHT_ID_KEY: ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
    sources.EXAMPLES: ChannelParameter(type=standard_artifacts.Examples, optional=True),
    sources.STATISTICS: ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True),
    sources.REFERENCE_STATISTICS: ChannelParameter(
      type=standard_artifacts.ExampleStatistics, optional=True
    ),
    sources.GATE: ChannelParameter(type=standard_artifacts.ExampleAnomalies, optional=True),
    MODEL_KEY: ChannelParameter(type=standard_artifacts.Model, optional=True),
    sources.MODEL_RUN: ChannelParameter(type=standard_artifacts.ModelRun, optional=True),
    sources.EVALUATION: ChannelParameter(type=standard_artifacts.ModelEvaluation, optional=True),
    BLESSING_KEY: ChannelParameter(type=standard_artifacts.ModelBlessing, optional=True),
    sources.OPTIMIZED_MODEL: ChannelParameter(type=artifacts.OptimizedModel, optional=True),
    OPTIMIZATION_REPORT_KEY: ChannelParameter(type=artifacts.OptimizationReport, optional=True),
    PUSHED_MODEL_KEY: ChannelParameter(type=standard_artifacts.PushedModel, optional=True),
  }
  OUTPUTS = {
    PAGE_KEY: ChannelParameter(type=artifacts.HtmlReport),
  }
