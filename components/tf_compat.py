"""Every TensorFlow behaviour this project patches, in one place, each with a version guard.

Each patch names the TensorFlow release it was written for. On another release it is not
applied and a warning says so; tests/unit/test_tf_compat.py holds a canary per patch that fails
when TensorFlow's behaviour changes, so a TF upgrade shows at once which patch to revisit.
"""

from __future__ import annotations

import logging

_LOG = logging.getLogger(__name__)

# The release line every patch below was written and checked against.
PATCHED_TF = "2.16"
_applied = False


def _tf_line() -> str:
  import tensorflow as tf

  return ".".join(tf.__version__.split(".")[:2])


def supported() -> bool:
  """Whether the running TensorFlow is the line the patches were checked against."""
  return _tf_line() == PATCHED_TF


def apply() -> None:
  """Applies the process-wide patches (idempotent).

  - AutoGraph leaves tf_keras internals unconverted, as it does for `keras`. TF 2.16's
    AutoGraph rules exempt the `keras` package but not `tf_keras`, so the first `fit` of every
    process re-transpiles Keras' own training code: 25 s instead of 3.5 s for a 2-layer model
    on a 2-core machine. Functions passed to tf.function and the `call` of every layer (user
    layers included) are still converted, exactly as with Keras 2 under its old package name.
  - The per-device side of a MultiDeviceIterator (what every strategy's `fit` iterates, even
    OneDeviceStrategy on the CPU) runs without tf.data autotuning (`per_device_dataset`).
  """
  global _applied
  if _applied:
    return
  _applied = True
  if not supported():
    _LOG.warning(
      "TensorFlow %s is not %s: the AutoGraph rule for tf_keras is not applied (first fit "
      "may be slower).",
      _tf_line(),
      PATCHED_TF,
    )
    return
  from tensorflow.python.autograph.core import config as autograph_config

  rule = autograph_config.DoNotConvert("tf_keras")
  if not any(
    isinstance(r, autograph_config.DoNotConvert) and r._prefix == "tf_keras"
    for r in autograph_config.CONVERSION_RULES
  ):
    autograph_config.CONVERSION_RULES = (rule, *autograph_config.CONVERSION_RULES)
  from tensorflow.python.data.ops import multi_device_iterator_ops

  if not getattr(multi_device_iterator_ops._create_device_dataset, "_tf_compat", False):
    create = multi_device_iterator_ops._create_device_dataset

    def per_device_dataset(*args, **kwargs):
      return without_autotune(create(*args, **kwargs))

    per_device_dataset._tf_compat = True
    multi_device_iterator_ops._create_device_dataset = per_device_dataset


def without_autotune(dataset):
  """`dataset` without tf.data's autotuning thread; give its transformations fixed sizes.

  TF 2.16's autotuning thread sleeps 10 ms, then twice as long after each round, up to 60 s,
  and deleting the iterator waits for its current sleep to end. Keras deletes the training
  iterator when `fit` returns. A pipeline iterated for 12 s (/cpu:0, plain or under
  OneDeviceStrategy) took 8.5 s to delete in 7 of 13 runs where any part of it autotuned, and
  0.02 to 0.08 s in 8 of 8 where none did (the input and, under the strategy, the
  MultiDeviceIterator's per-device side). After the default model's 16 s fit at 200,000 rows,
  `fit` took 1.4 to 17 s to return in 5 runs of 8; at 1,000,000 rows once 26 s. The per-device
  side (a generator and a fixed prefetch) has nothing to tune, and the default model's input
  gives its map and prefetch fixed sizes.
  """
  import tensorflow as tf

  options = tf.data.Options()
  options.autotune.enabled = False
  return dataset.with_options(options)


def backup_and_restore(backup_dir: str, save_freq="epoch", backup_class=None):
  """A BackupAndRestore callback (or `backup_class`'s) that also accepts OneDeviceStrategy.

  tf_keras 2.16 rejects OneDeviceStrategy only by its allow-list (`_supported_strategies`);
  its checkpointing works there as under the default strategy, and single-process runs get
  restarted too (pod retries, a killed local run), so they resume as well.
  """
  import tensorflow as tf

  backup_class = backup_class or tf.keras.callbacks.BackupAndRestore
  callback = backup_class(backup_dir, save_freq=save_freq)
  if supported() and hasattr(callback, "_supported_strategies"):
    callback._supported_strategies = (
      *callback._supported_strategies,
      tf.distribute.OneDeviceStrategy,
    )
  return callback


def shard_by_record(strategy) -> None:
  """Makes `strategy` shard a run_fn's auto-sharded input by record instead of by file.

  Under MultiWorkerMirroredStrategy Keras distributes a run_fn's tf.data input with the AUTO
  policy, which shards by file: with fewer files than workers some workers get no data and
  `fit` fails with "Empty logs". Datasets that set their own policy keep it. Wraps the
  strategy object's `experimental_distribute_dataset`, which Keras calls.
  """
  import tensorflow as tf

  distribute = strategy.experimental_distribute_dataset
  auto = tf.data.experimental.AutoShardPolicy.AUTO

  def by_data(dataset, options=None):
    if dataset.options().experimental_distribute.auto_shard_policy == auto:
      data_options = tf.data.Options()
      data_options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
      )
      dataset = dataset.with_options(data_options)
    return distribute(dataset, options)

  strategy.experimental_distribute_dataset = by_data


def keras_tuner_on_tf_keras() -> bool:
  """Imports keras_tuner so that it uses tf_keras (Keras 2) when TF_USE_LEGACY_KERAS=1.

  keras_tuner 1.4 picks its Keras by importing `keras`, which is Keras 3 whenever it is
  installed (TensorFlow 2.16 depends on it), even when `tf.keras` is tf_keras. A tuner_fn that
  builds tf.keras models then fails with "Expected the model-building function ... to return
  a valid Keras Model instance" (keras-team/keras-tuner#1039, open). Only
  `keras_tuner.src.backend.config` imports `keras` itself, and keras_tuner's classes are bound
  at import time, so `keras` is pointed at tf_keras while keras_tuner is first imported, and
  restored right after. Call this before anything imports TFX (`tfx.v1` imports keras_tuner).

  Returns:
    Whether keras_tuner now uses tf_keras (False when it was imported earlier with Keras 3,
    or when TF_USE_LEGACY_KERAS is not set).
  """
  import os
  import sys

  if os.environ.get("TF_USE_LEGACY_KERAS") != "1":
    return False
  if "keras_tuner" not in sys.modules:
    import tf_keras

    missing = object()
    saved = sys.modules.get("keras", missing)
    sys.modules["keras"] = tf_keras
    try:
      import keras_tuner  # noqa: F401
    finally:
      if saved is missing:
        del sys.modules["keras"]
      else:
        sys.modules["keras"] = saved
  from keras_tuner.src.backend import config as kt_config

  if kt_config.multi_backend():
    _LOG.warning(
      "keras_tuner was imported with Keras 3 before tf_compat could point it at tf_keras; "
      "tuner_fns that build tf.keras models will fail."
    )
    return False
  return True


# The TFX release line `install_user_modules_once` and `tfx_package_only_for_remote_beam` were
# written and checked against.
PATCHED_TFX = "1.16"
# Wheel path -> the folder pip installed it into, once per process.
_INSTALLED_WHEELS: dict[str, str] = {}


def _wrap_tfx_function(module, name: str, wrap, unpatched: str) -> bool:
  """Replaces `module.name` with `wrap(stock function)` once per process, on PATCHED_TFX's line.

  Returns:
    Whether the wrapper is in place; on another TFX line, False with a warning that says what
    stays `unpatched`.
  """
  import tfx

  if getattr(getattr(module, name), "_tf_compat", False):
    return True
  if ".".join(tfx.__version__.split(".")[:2]) != PATCHED_TFX:
    _LOG.warning("TFX %s is not %s: %s.", tfx.__version__, PATCHED_TFX, unpatched)
    return False
  wrapped = wrap(getattr(module, name))
  wrapped._tf_compat = True
  setattr(module, name, wrapped)
  return True


def install_user_modules_once() -> bool:
  """Makes TFX pip-install each packaged user module once per process, not once per use.

  TFX 1.16 packages a component's module file as a wheel (named by the module's content hash)
  and runs `pip install --target <new temp folder>` every time it enters the module's context:
  three times in one Transform execution (the executor, then `preprocessing_fn` and
  `stats_options_updater_fn`), twice for the Trainer's `run_fn`, and once more when the
  Optimizer imports the trainer module. Each pip process took about 2.5 s of a 2-core machine.
  With this patch the first install goes to a folder of this process and later ones copy that
  folder, so every context still gets a folder of its own on `sys.path`. Call it at process
  start (run_local, the Kubeflow step entrypoint): the first install happens before any
  executor code runs.

  Returns:
    Whether the patch is in place (False on another TFX line, with a warning).
  """
  import atexit
  import os
  import shutil
  import tempfile

  from tfx.components.util import udf_utils

  def wrap(install):
    def install_once(pip_dependency: str, temp_dir: str | None = None) -> str:
      wheel = os.path.abspath(pip_dependency) if pip_dependency.endswith(".whl") else None
      if wheel is None or not os.path.isfile(wheel):
        return install(pip_dependency, temp_dir)
      installed = _INSTALLED_WHEELS.get(wheel)
      if installed is None or not os.path.isdir(installed):
        installed = install(wheel, tempfile.mkdtemp(prefix="tfx-user-module-"))
        _INSTALLED_WHEELS[wheel] = installed
        atexit.register(shutil.rmtree, installed, ignore_errors=True)
      temp_dir = temp_dir or tempfile.mkdtemp()
      shutil.copytree(installed, temp_dir, dirs_exist_ok=True)
      return temp_dir

    return install_once

  return _wrap_tfx_function(
    udf_utils,
    "install_to_temp_directory",
    wrap,
    "user module wheels are pip-installed at every use",
  )


def tfx_package_only_for_remote_beam() -> bool:
  """Makes TFX's Beam executors build a TFX package only for a runner off this machine.

  Given any Beam argument (`--direct_num_workers=2` too) and none of Beam's dependency flags,
  TFX 1.16's BaseBeamExecutor copies the installed TFX (about 49 MB) into a new temp folder and
  builds an sdist of it for the runner's workers (`dependency_utils.make_beam_dependency_flags`):
  about 7 s of a 2-core machine in each Beam component, and a folder nobody removes. The
  DirectRunner's workers are processes of this machine, which have TFX already. With this patch
  the package is built, as before, only where `beam_args.distributed_runner` names a runner
  that runs elsewhere (Dataflow, Flink, Spark, a portable job server). Call it at process start
  (run_local, the Kubeflow step entrypoint).

  Returns:
    Whether the patch is in place (False on another TFX line, with a warning).
  """
  from tfx.utils import dependency_utils

  from components import beam_args

  def wrap(make):
    def for_remote_runners(args):
      if beam_args.distributed_runner(args) is None:
        return list(args)
      return make(args)

    return for_remote_runners

  return _wrap_tfx_function(
    dependency_utils,
    "make_beam_dependency_flags",
    wrap,
    "every Beam component given Beam options builds a TFX package",
  )


def register_filesystems(paths) -> bool:
  """Makes TensorFlow (and TFX's fileio) read and write the object stores some paths name.

  gs:// is built in (tensorflow-io-gcs-filesystem); s3:// needs tensorflow-io, whose import
  registers TensorFlow's S3 file system. tensorflow-io 0.37 aborts the interpreter at exit
  ("pure virtual method called"), so a process that registered it should end with os._exit.

  Args:
    paths: paths and URIs the process will use (None entries are ignored).

  Returns:
    Whether tensorflow-io was imported.

  Raises:
    UserInputError: for s3:// paths without tensorflow-io installed.
  """
  import importlib.util

  from core.errors import UserInputError

  if not any(str(p).startswith("s3://") for p in paths if p):
    return False
  if importlib.util.find_spec("tensorflow_io") is None:
    raise UserInputError(
      "s3:// paths need TensorFlow's S3 file system from tensorflow-io; install the project "
      "with the s3 extra: pip install '.[s3]'."
    )
  import tensorflow_io  # noqa: F401  (registers the s3 file system)

  return True


class StrategyScope:
  """What happened inside `yielding_scope`: whose strategy was in effect when it ended.

  Attributes:
    trainer_strategy: the strategy whose scope `yielding_scope` entered.
    module_strategy: the first other strategy whose scope the code inside entered (it then
      replaced the trainer's), or None when the trainer's stayed in effect.
  """

  def __init__(self, trainer_strategy):
    self.trainer_strategy = trainer_strategy
    self.module_strategy = None

  @property
  def strategy(self):
    """The strategy that trained: the module's when it entered one, else the trainer's."""
    return self.module_strategy or self.trainer_strategy


def yielding_scope(strategy):
  """Enters `strategy.scope()` until the code inside enters the scope of a strategy of its own.

  A stock TFX module builds its own strategy in run_fn (`tf.distribute.MirroredStrategy()`) and
  enters its scope, as the TFX examples do; inside another strategy's scope TensorFlow refuses
  that ("Mixing different tf.distribute.Strategy objects"). The stock Trainer enters no scope,
  so there the module's strategy simply trains. This gives the same result and keeps the
  trainer's choice for modules that take it (`tf.distribute.get_strategy()`, variables created
  without a scope): while this context is active, the first time the current thread enters the
  scope of another strategy (not TensorFlow's default one) at the top level of the trainer's
  scope, the trainer's scope is closed first and stays closed, and the module's strategy is
  recorded. TensorFlow has no public hook for that, so `StrategyBase.scope`, which every
  strategy's `scope()` reaches, is wrapped for the duration (checked for TF 2.16 by a canary).

  Args:
    strategy: the trainer's tf.distribute.Strategy.

  Returns:
    A context manager yielding a `StrategyScope`.
  """
  import contextlib
  import threading

  from tensorflow.python.distribute import distribute_lib

  @contextlib.contextmanager
  def scope():
    record = StrategyScope(strategy)
    if not supported():
      _LOG.warning(
        "TensorFlow %s is not %s: run_fn runs inside the trainer's strategy scope, and a "
        "module that enters a strategy of its own will fail.",
        _tf_line(),
        PATCHED_TF,
      )
      with strategy.scope():
        yield record
      return
    outer = strategy.scope()
    outer.__enter__()
    owner = threading.get_ident()
    state = {"open": True}
    original = distribute_lib.StrategyBase.scope

    def scope_of(self):
      if (
        state["open"]
        and self is not strategy
        and threading.get_ident() == owner
        and not isinstance(self, distribute_lib._DefaultDistributionStrategy)
        and distribute_lib.get_strategy() is strategy
        and distribute_lib.in_cross_replica_context()
      ):
        outer.__exit__(None, None, None)
        state["open"] = False
        record.module_strategy = self
        _LOG.info(
          "run_fn entered the scope of its own %s; it replaces the trainer's %s.",
          type(self).__name__,
          type(strategy).__name__,
        )
      return original(self)

    distribute_lib.StrategyBase.scope = scope_of
    try:
      yield record
    finally:
      distribute_lib.StrategyBase.scope = original
      if state["open"]:
        outer.__exit__(None, None, None)

  return scope()


def beam_pipeline_args(executor) -> list[str]:
  """A TFX Beam executor's Beam arguments.

  TFX 1.16's BaseBeamExecutor keeps them in `_beam_pipeline_args` and has no accessor; this is
  the one place that reads the attribute (tests/unit/test_tf_compat.py checks it is still there).
  """
  return list(getattr(executor, "_beam_pipeline_args", None) or [])


def set_beam_pipeline_args(executor, args: list[str]) -> None:
  """Replaces a TFX Beam executor's Beam arguments (the attribute `beam_pipeline_args` reads)."""
  executor._beam_pipeline_args = list(args)


def executor_context(executor):
  """The orchestrator's context a TFX executor was built with (pipeline node and run), or None.

  TFX 1.16's BaseExecutor keeps it in `_context` and has no accessor.
  """
  return getattr(executor, "_context", None)


def pipeline_ir(pipeline):
  """The IR LocalDagRunner.run would run: module files packaged, then the pipeline compiled.

  TFX 1.16 does this in `tfx_runner._make_pipeline_proto`, which has no public equivalent;
  `LocalDagRunner.run_with_ir` takes the result.
  """
  from tfx.orchestration.portable import tfx_runner

  return tfx_runner._make_pipeline_proto(pipeline)


def kfp_v2_executor_flags_parser():
  """The absl flags parser of TFX's Kubeflow V2 container entrypoint (`_parse_flags`)."""
  from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as stock

  return stock._parse_flags
