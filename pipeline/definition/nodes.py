"""The pipeline's node ids, in run order: the names TFX, ML Metadata and KFP tasks know them by.

`pipeline/definition/factory.py` gives each component its id from here; the runners, the summary
and the Kubeflow post-processing find components by these names.
"""

CSV_EXAMPLE_GEN = "CsvExampleGen"
STATISTICS_GEN = "StatisticsGen"
SCHEMA_GEN = "SchemaGen"
EXAMPLE_VALIDATOR = "ExampleValidator"
TRANSFORM = "Transform"
TUNER = "Tuner"
LIVE_MODEL = "LiveModel"
DATA_GATE = "DataGate"
TRAINER = "DistributedTrainer"
EVALUATOR = "Evaluator"
OPTIMIZER = "Optimizer"
PUSHER = "Pusher"
# Kubeflow only: the report page as the run's HTML artifact (locally, run_local.py writes it).
RUN_REPORT = "RunReport"

RUN_ORDER = (
  CSV_EXAMPLE_GEN,
  STATISTICS_GEN,
  SCHEMA_GEN,
  EXAMPLE_VALIDATOR,
  TRANSFORM,
  TUNER,
  LIVE_MODEL,
  DATA_GATE,
  TRAINER,
  EVALUATOR,
  OPTIMIZER,
  PUSHER,
  RUN_REPORT,
)
