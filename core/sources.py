"""What a run's report page reads: the roles of the artifacts run_summary.json points at.

`pipeline/cli/summary.py` (from ML Metadata) and the Kubeflow RunReport step (from its inputs)
fill `run_summary.json["artifacts"]` with one `pointer` per role below; the page reads them by
these names only, so it knows no node ids.
"""

from collections.abc import Callable, Iterable
from typing import Any

# The key of run_summary.json that holds the pointers.
ARTIFACTS = "artifacts"

EXAMPLES = "examples"  # CsvExampleGen's Examples: row counts, the quarantine file.
STATISTICS = "statistics"  # StatisticsGen's ExampleStatistics: tonight's columns.
REFERENCE_STATISTICS = "reference_statistics"  # LiveModel's: the live version's training data.
GATE = "gate"  # DataGate's result (gate.json).
MODEL_RUN = "model_run"  # The trainer's ModelRun: the per-epoch progress.
EVALUATION = "evaluation"  # The Evaluator's ModelEvaluation: TFMA's files and predictions.
OPTIMIZED_MODEL = "optimized_model"  # The Optimizer's variants (variants.json).

ROLES = (
  EXAMPLES,
  STATISTICS,
  REFERENCE_STATISTICS,
  GATE,
  MODEL_RUN,
  EVALUATION,
  OPTIMIZED_MODEL,
)


def pointer(uri: str, names: Iterable[str], get: Callable[[str], Any]) -> dict[str, Any]:
  """One role's entry: the artifact's uri and its custom properties (`names`, read by `get`)."""
  return {"uri": uri, "properties": {k: get(k) for k in names}}


# A model module may leave its per-epoch metrics in its ModelRun folder under this name, as
# {"epochs": [{"epoch": 0-based, "loss": ..., "val_loss": ..., <metric>: ...}, ...]}; the page
# draws them (the default model, models/tabular, writes it).
EPOCH_HISTORY_FILE = "epoch_history.json"
