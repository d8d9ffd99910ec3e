"""Names that more than one component (or a component and the pipeline) must spell alike.

One owner, so that a writer and its readers cannot drift apart: the Examples properties the
ExampleGen writes and others read, and the execution-property keys that LiveModel, the Pusher
and the Kubeflow key task share. Properties that one component writes on its own output and
the runners read are named beside that component (e.g. the Model's in
`components/distributed_trainer/constants.py`), and readers import them from there.
"""

# Execution properties of LiveModel and the Pusher (and parameters of the KFP live-key task).
SERVING_DIR_KEY = "serving_dir"
MODEL_NAME_KEY = "model_name"
LIVE_KEY_KEY = "live_key"

# Examples (the kit's CsvExampleGen): rows written to each split, "num_rows_<split>".
EXAMPLES_ROWS_PREFIX = "num_rows_"
# Examples: rows quarantined (the bad ones and those without a label).
EXAMPLES_BAD_ROWS = "num_bad_rows"
# Examples: of those, rows left out only because their label cell is empty.
EXAMPLES_UNLABELED_ROWS = "num_unlabeled_rows"


def examples_rows(split: str) -> str:
  """The property holding the number of rows the ExampleGen wrote to `split`."""
  return f"{EXAMPLES_ROWS_PREFIX}{split}"
