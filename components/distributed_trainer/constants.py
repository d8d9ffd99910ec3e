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
# Optional input: ExampleValidator output; anomalies stop training before it starts.
ANOMALIES_KEY = "anomalies"

# Keys of `custom_config` that the build_model path reads (run_fn modules get the whole dict).
LABEL_KEY_CONFIG = "label_key"
NUM_CLASSES_CONFIG = "num_classes"
HPARAMS_CONFIG = "hparams"
LEARNING_RATE_CONFIG = "learning_rate"
SEED_CONFIG = "seed"

# Names of the module functions of the two module styles.
RUN_FN = "run_fn"
BUILD_MODEL_FN = "build_model"
DEFAULT_MODULE_PATH = "components.distributed_trainer.default_module"

# Custom properties written on the Model artifact.
STRATEGY_PROPERTY = "strategy"
NUM_REPLICAS_PROPERTY = "num_replicas_in_sync"
STRATEGY_REASON_PROPERTY = "strategy_reason"
EVAL_ACCURACY_PROPERTY = "eval_accuracy"
MODULE_STYLE_PROPERTY = "module_style"
NUM_WORKERS_PROPERTY = "num_workers"
RESTARTS_PROPERTY = "restarts"
INITIAL_EPOCH_PROPERTY = "initial_epoch"
EXAMPLES_PER_SEC_PROPERTY = "train_examples_per_sec"

DEFAULT_WORKER_TIMEOUT_S = 1800
DEFAULT_MAX_RESTARTS = 0
