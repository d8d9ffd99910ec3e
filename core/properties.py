"""Names that more than one component (or a component and the pipeline) must spell alike.

One owner, so that a writer and its readers cannot drift apart: the Examples properties the
ExampleGen writes and others read, and the execution-property keys that LiveModel, the Pusher
and the Kubeflow key task share. Properties that one component writes on its own output and
the runners read are named beside that component (e.g. the Model's in
`components/distributed_trainer/constants.py`), and readers import them from there.
"""

# The split names of the Examples the kit's ExampleGen writes, and the Trainer, Evaluator and
# data gate read (TFX's own defaults).
TRAIN_SPLIT = "train"
EVAL_SPLIT = "eval"

# Execution properties of LiveModel and the Pusher (and parameters of the KFP live-key task).
SERVING_DIR_KEY = "serving_dir"
MODEL_NAME_KEY = "model_name"
LIVE_KEY_KEY = "live_key"

# Examples (the kit's CsvExampleGen): rows written to each split, "num_rows_<split>".
EXAMPLES_ROWS_PREFIX = "num_rows_"
# Examples: the spans the rows were read from (a JSON list).
EXAMPLES_SPANS = "data_spans"
# Examples: str(span) -> {"rows", "digest"} of the rows read from each span (JSON; see
# `example_gen_lib.span_digests`): the data gate finds a span delivered again with them.
EXAMPLES_SPAN_DIGESTS = "span_digests"
# Examples: split -> counts (and moments) of the label column's values (JSON): the Evaluator's
# automatic floor, the data gate's and the Pusher's manifest's label counts.
EXAMPLES_LABEL_STATS = "label_stats"
# Examples: rows quarantined (the bad ones and those without a label).
EXAMPLES_BAD_ROWS = "num_bad_rows"
# Examples: of those, rows left out only because their label cell is empty.
EXAMPLES_UNLABELED_ROWS = "num_unlabeled_rows"
# Examples: of those, the rows whose text label is a missing token, by token (JSON, e.g.
# {"NA": 11}); absent when there are none. `--task multiclass` keeps them as classes.
EXAMPLES_UNLABELED_TOKENS = "unlabeled_label_tokens"

# TFX's blessing flag on a ModelBlessing (the Evaluator's, 0/1) and an ExampleAnomalies (the
# ExampleValidator's, JSON by split).
BLESSED_PROPERTY = "blessed"


def examples_rows(split: str) -> str:
  """The property holding the number of rows the ExampleGen wrote to `split`."""
  return f"{EXAMPLES_ROWS_PREFIX}{split}"
