"""Spec keys of the DistributedTrainer; its Model properties live in core.properties."""

# Execution parameters added to the stock TrainerSpec.
STRATEGY_KEY = "strategy"
LOCAL_WORKERS_KEY = "local_workers"
LOCAL_PS_KEY = "local_ps"
GLOBAL_BATCH_SIZE_KEY = "global_batch_size"
NUM_EPOCHS_KEY = "num_epochs"
STEPS_PER_EXECUTION_KEY = "steps_per_execution"
MIXED_PRECISION_KEY = "mixed_precision"
WORKER_TIMEOUT_KEY = "worker_timeout_s"
MAX_RESTARTS_KEY = "max_restarts"
# JSON of tfjob_manifest.TFJobSettings: set by run_kubeflow.py --workers, the step runs a TFJob.
TFJOB_KEY = "tfjob"
# Optional input: ExampleValidator output; anomalies stop training before it starts.
ANOMALIES_KEY = "anomalies"
