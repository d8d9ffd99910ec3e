"""Spec keys, custom_config keys and artifact property names of the DistributedTrainer."""

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

# Keys of `custom_config` the pipeline fills for the module (the default model reads them; every
# run_fn gets the whole dict).
LABEL_KEY_CONFIG = "label_key"
TASK_CONFIG = "task"
EXCLUDE_COLUMNS_CONFIG = "exclude_columns"
HPARAMS_CONFIG = "hparams"
SEED_CONFIG = "seed"
PROFILE_STEPS_CONFIG = "profile_steps"
TUNE_TRIALS_CONFIG = "tune_trials"
# The column the ExampleGen split train from eval by (--split-column): the default model holds
# out whole groups of it for early stopping, as the eval split does.
SPLIT_COLUMN_CONFIG = "split_column"

# Custom properties written on the Model artifact.
STRATEGY_PROPERTY = "strategy"
NUM_REPLICAS_PROPERTY = "num_replicas_in_sync"
STRATEGY_REASON_PROPERTY = "strategy_reason"
# "trainer" or "module": who chose the strategy that trained (strategy_lib.CHOSEN_BY_*).
STRATEGY_CHOSEN_BY_PROPERTY = "strategy_chosen_by"
EVAL_ACCURACY_PROPERTY = "eval_accuracy"
EVAL_METRICS_PROPERTY = "eval_metrics"
MODULE_STYLE_PROPERTY = "module_style"
# The module whose run_fn built the model, as the trainer loaded it (a module path, a packaged
# `name@wheel` or a module file); readers of the Keras model import it first, for its layers.
TRAINER_MODULE_PROPERTY = "trainer_module"
NUM_WORKERS_PROPERTY = "num_workers"
RESTARTS_PROPERTY = "restarts"
INITIAL_EPOCH_PROPERTY = "initial_epoch"
STEPS_RUN_PROPERTY = "steps_run"
# JSON of TrainResult.plan (the default model's TrainingPlan), with the epochs it ran and the
# epoch it kept.
TRAINING_PLAN_PROPERTY = "training_plan"
EXAMPLES_PER_SEC_PROPERTY = "train_examples_per_sec"
TASK_PROPERTY = "task"
LABEL_CLASSES_PROPERTY = "label_classes"
HPARAMS_PROPERTY = "hparams"
PROFILE_DIR_PROPERTY = "profile_dir"
# Why --profile-steps wrote no profile (training stopped before the range), when it did not.
PROFILE_SKIPPED_PROPERTY = "profile_skipped"
DATA_FINGERPRINTS_PROPERTY = "data_fingerprints"
TRAINING_FINGERPRINT_PROPERTY = "training_fingerprint"
# Where a TFJob trained: its name, namespace and replica counts (JSON {"worker": 2, ...}).
TFJOB_NAME_PROPERTY = "tfjob_name"
TFJOB_NAMESPACE_PROPERTY = "tfjob_namespace"
TFJOB_REPLICAS_PROPERTY = "tfjob_replicas"
