"""Reads a ModelEvaluation's overall metrics: the candidate's, the baseline's and their diffs."""

# The sides of the overall slice's metrics, as read_overall_metrics returns them.
CANDIDATE = "candidate"
BASELINE = "baseline"
DIFF = "diff_vs_baseline"


def read_overall_metrics(uri: str) -> dict[str, dict[str, float]]:
  """The overall slice's metrics in a ModelEvaluation folder (TFMA's files, stock or ours).

  Returns:
    {"candidate": {name: value}, "baseline": {...}, "diff_vs_baseline": {...}}; a model
    without metrics (no baseline) has an empty dict; an unreadable folder gives all empty.
  """
  import tensorflow_model_analysis as tfma

  out: dict[str, dict[str, float]] = {CANDIDATE: {}, BASELINE: {}, DIFF: {}}
  try:
    results = tfma.load_metrics(uri)
  except (OSError, ValueError):
    return out
  for metrics_for_slice in results:
    if metrics_for_slice.slice_key.single_slice_keys:
      continue
    for kv in metrics_for_slice.metric_keys_and_values:
      key, value = kv.key, kv.value
      if not value.HasField("double_value"):
        continue
      if key.is_diff:
        side = DIFF
      elif key.model_name in ("", CANDIDATE):
        side = CANDIDATE
      else:
        side = BASELINE
      out[side][key.name] = round(value.double_value.value, 6)
  return out
