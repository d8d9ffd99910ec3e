"""DataGate component: stops a night whose data differs from what the live version learned."""

from __future__ import annotations

import json
from collections.abc import Sequence

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts

from components.data_gate import executor
from components.data_gate import thresholds as th
from components.data_gate.spec import DataGateSpec


class DataGate(base_component.BaseComponent):
  """Compares tonight's data with the data the live version was trained on, before training.

  With TFDV (`validate_statistics` against the live version's schema, its drift comparators
  and the row count's), plus the checks TFDV has no comparator for: a column emptied, more
  empty cells, a rescaled number column, the label's class shares, and the live model's
  accuracy on tonight's eval rows (`gate_lib`, `live_check`). A change that stops the night
  fails this component with one line naming each column, what changed (the statistic and the
  threshold) and how to accept it; nothing downstream runs, so nothing is trained or pushed.

  Outputs:
    result: an ExampleAnomalies artifact: TFDV's anomalies (`Split-train/SchemaDiff.pb`) and
      the gate's report (`gate.json`), which the DistributedTrainer checks.
  """

  SPEC_CLASS = DataGateSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(
    self,
    *,
    statistics: types.BaseChannel,
    schema: types.BaseChannel,
    examples: types.BaseChannel,
    reference_statistics: types.BaseChannel,
    reference_schema: types.BaseChannel,
    baseline: types.BaseChannel,
    label_key: str,
    task: str,
    serving_dir: str,
    model_name: str,
    exclude_columns: Sequence[str] = (),
    thresholds: th.Thresholds | None = None,
    accept: Sequence[str] = (),
  ):
    """Wires the gate.

    Args:
      statistics: tonight's ExampleStatistics.
      schema: tonight's Schema.
      examples: tonight's Examples (label counts, and the eval rows the live model scores).
      reference_statistics: LiveModel's reference_statistics.
      reference_schema: LiveModel's reference_schema.
      baseline: LiveModel's baseline (the live model).
      label_key: the label column.
      task: binary, multiclass or regression.
      serving_dir: the serving folder, where accepted changes are recorded and the night's
        facts are kept for its record.
      model_name: the model's name in it.
      exclude_columns: columns the model leaves out (their drift does not stop a night).
      thresholds: the gate's thresholds (defaults: `thresholds.DEFAULTS`).
      accept: columns whose changes tonight are accepted (`--accept-changes`), or `all`.

    Raises:
      thresholds.GateSettingsError: for an empty name in `accept`.
    """
    accepted = th.parse_accepted(accept)
    super().__init__(
      spec=DataGateSpec(
        statistics=statistics,
        schema=schema,
        examples=examples,
        reference_statistics=reference_statistics,
        reference_schema=reference_schema,
        baseline=baseline,
        label_key=label_key,
        task=task,
        exclude_columns=json.dumps(list(exclude_columns)),
        thresholds=(thresholds or th.Thresholds()).to_json(),
        accept=json.dumps(accepted),
        serving_dir=serving_dir,
        model_name=model_name,
        result=types.Channel(type=standard_artifacts.ExampleAnomalies),
      )
    )
