"""Every default value and name list the components and runners share, in one place.

Plain Python: no TensorFlow or TFX imports, so runners can read it before anything heavy loads.
"""

import os

# Label and task.
LABEL_KEY = "label"
TASK = "auto"
MAX_CLASSES = 1000
# Fewer eval rows than this and nothing is blessed: a metric on a handful of rows says little.
MIN_EVAL_EXAMPLES = 50

# Training.
TRAIN_STEPS = 600
EVAL_STEPS = 0  # 0: the whole eval split.
GLOBAL_BATCH_SIZE = 64
NUM_EPOCHS = 5
STEPS_PER_EXECUTION = 10
# Short epochs are backed up every this many steps instead of after each epoch: a checkpoint
# costs about as much as 20 small steps.
BACKUP_STEPS = 200
WORKER_TIMEOUT_S = 1800
MAX_RESTARTS = 0

# Module styles, as recorded on the Model artifact.
RUN_FN = "run_fn"
BUILD_MODEL_FN = "build_model"
PREPROCESSING_FN = "preprocessing_fn"
TUNER_FN = "tuner_fn"
# The modules the trainer loads by module path when the pipeline names none: the default model,
# and the run_fn that trains a module defining only build_model(hparams). Strings, as a user's
# module path is: components/ never imports models/.
DEFAULT_MODULE_PATH = "models.tabular.module"
BUILD_MODEL_RUN_FN = "models.tabular.custom_network.run_fn"

# tf.distribute strategies.
AUTO = "auto"
ONE_DEVICE = "one_device"
MIRRORED = "mirrored"
MULTI_WORKER_MIRRORED = "multi_worker_mirrored"
PARAMETER_SERVER = "parameter_server"
TPU = "tpu"
STRATEGY_NAMES = (AUTO, ONE_DEVICE, MIRRORED, MULTI_WORKER_MIRRORED, PARAMETER_SERVER, TPU)

# Optimizer variants, in report order.
PRUNED = "pruned"
TFLITE_FLOAT32 = "tflite_float32"
TFLITE_DYNAMIC_RANGE = "tflite_dynamic_range"
TFLITE_FLOAT16 = "tflite_float16"
TFLITE_INT8 = "tflite_int8"
PRUNED_INT8 = "pruned_int8"
QAT = "qat"
ONNX = "onnx"
TENSORRT_FP16 = "tensorrt_fp16"
VARIANTS = (
  PRUNED,
  TFLITE_FLOAT32,
  TFLITE_DYNAMIC_RANGE,
  TFLITE_FLOAT16,
  TFLITE_INT8,
  PRUNED_INT8,
  QAT,
  ONNX,
  TENSORRT_FP16,
)
# QAT retrains, so it is opt-in; TensorRT is switched by the `tensorrt` option alone.
DEFAULT_VARIANTS = tuple(v for v in VARIANTS if v not in (QAT, TENSORRT_FP16))
TENSORRT_OFF = "off"
TENSORRT_AUTO = "auto"
TENSORRT_REQUIRED = "required"
TENSORRT_MODES = (TENSORRT_OFF, TENSORRT_AUTO, TENSORRT_REQUIRED)
TARGET_SPARSITY = 0.9
# A variant is blessed if its metric is at most this many points (percent) worse, and if it
# agrees with the baseline on at least this share of the eval rows.
VARIANT_MAX_DROP = 1.0
VARIANT_MIN_AGREEMENT = 0.9

# Blessing.
MAX_ACCURACY_DROP = 0.01
# Automatic floors: beat the most frequent class by this much; stay under this share of the
# label variance (regression).
AUTO_FLOOR_MARGIN = 0.01
AUTO_MSE_SHARE = 0.99

# Pusher.
KEEP_VERSIONS = 5


def local_cluster_processes(workers: int, ps: int) -> int:
  """The processes a local cluster starts: the workers, the parameter servers and their chief."""
  return workers + ps + (1 if ps else 0)


def max_local_processes() -> int:
  """How many processes a local cluster (`local_cluster_processes`) may start.

  A local cluster shares this machine's cores: four processes per logical CPU, at least eight,
  keeps a mistyped count (1000) from starting a thousand TensorFlow processes. Past that, train
  across machines (run_kubeflow.py --workers N).
  """
  return max(8, 4 * (os.cpu_count() or 1))
