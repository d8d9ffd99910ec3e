"""Canaries for components.tf_compat: each fails when TensorFlow changes what a patch works around.

When one fails after an upgrade, the patch it names is either no longer needed or no longer
right; re-check it and PATCHED_TF.
"""

import subprocess

import pytest
import tensorflow as tf

from components import tf_compat
from tests.support.cli_runs import project_env, run_python


def test_patches_were_written_for_this_tensorflow_line():
  assert tf_compat.supported(), (
    f"TensorFlow {tf.__version__} is not {tf_compat.PATCHED_TF}: re-check every patch"
  )


def test_autograph_rules_still_convert_tf_keras_unless_patched():
  # Canary for apply(): TF's own rules exempt `keras` but not `tf_keras`.
  proc = run_python(
    """
    from tensorflow.python.autograph.core import config
    names = [r._prefix for r in config.CONVERSION_RULES if type(r).__name__ == "DoNotConvert"]
    print("keras" in names, "tf_keras" in names)
    """
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.split() == ["True", "False"]
  tf_compat.apply()
  from tensorflow.python.autograph.core import config

  assert any(getattr(r, "_prefix", None) == "tf_keras" for r in config.CONVERSION_RULES)


def test_per_device_datasets_autotune_unless_patched():
  # Canary for apply(): a MultiDeviceIterator's per-device datasets take TF's default options,
  # autotuning on, whatever the input's options say.
  proc = run_python(
    """
    import tensorflow as tf
    from tensorflow.python.data.ops import multi_device_iterator_ops as m
    options = tf.data.Options()
    options.autotune.enabled = False
    it = m.OwnedMultiDeviceIterator(tf.data.Dataset.range(4).with_options(options), ["/cpu:0"])
    print(it._device_iterators[0]._dataset.options().autotune.enabled)
    """
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.split()[-1] in ("True", "None")
  tf_compat.apply()
  from tensorflow.python.data.ops import multi_device_iterator_ops as m

  it = m.OwnedMultiDeviceIterator(tf.data.Dataset.range(4), ["/cpu:0"])
  assert it._device_iterators[0]._dataset.options().autotune.enabled is False
  assert [int(x[0]) for x in it] == [0, 1, 2, 3]


def test_without_autotune_turns_off_only_the_autotuning():
  ds = tf_compat.without_autotune(tf.data.Dataset.range(6).map(lambda x: x * 2, 2).prefetch(2))
  assert ds.options().autotune.enabled is False
  assert list(ds.as_numpy_iterator()) == [0, 2, 4, 6, 8, 10]


def test_backup_and_restore_still_rejects_one_device_strategy_unless_patched(tmp_path):
  # Canary for backup_and_restore(): tf_keras allows it by an allow-list only.
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  plain = tf.keras.callbacks.BackupAndRestore(str(tmp_path / "plain"))
  assert tf.distribute.OneDeviceStrategy not in plain._supported_strategies
  patched = tf_compat.backup_and_restore(str(tmp_path / "patched"))
  assert tf.distribute.OneDeviceStrategy in patched._supported_strategies
  with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
  model.fit(tf.zeros((8, 2)), tf.zeros((8, 1)), epochs=1, verbose=0, callbacks=[patched])


def test_keras_tuner_picks_keras_3_unless_pointed_at_tf_keras(tmp_path):
  # Canary for keras_tuner_on_tf_keras() (keras-team/keras-tuner#1039).
  plain = run_python(
    """
    import keras_tuner
    from keras_tuner.src.backend import config
    print(config.multi_backend())
    """
  )
  assert plain.returncode == 0, plain.stderr[-2000:]
  assert plain.stdout.split()[-1] == "True"
  patched = run_python(
    f"""
    from components import tf_compat
    print(tf_compat.keras_tuner_on_tf_keras())
    import tensorflow as tf
    import keras_tuner

    def build(hp):
      model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(hp.Int("u", 1, 2))])
      model.compile("sgd", "mse")
      return model

    tuner = keras_tuner.RandomSearch(build, objective="loss", max_trials=1, overwrite=True,
                                     directory={str(tmp_path / "kt")!r}, project_name="c")
    tuner.search(tf.zeros((4, 2)), tf.zeros((4, 2)), epochs=1, verbose=0)
    print(len(tuner.get_best_hyperparameters()))
    """
  )
  assert patched.returncode == 0, patched.stderr[-3000:]
  assert patched.stdout.split()[-2:] == ["True", "1"]


def test_auto_shard_policy_is_still_auto_by_default():
  # Canary for shard_by_record(): it rewrites datasets left on the AUTO policy.
  ds = tf.data.Dataset.range(4)
  assert ds.options().experimental_distribute.auto_shard_policy == (
    tf.data.experimental.AutoShardPolicy.AUTO
  )


@pytest.mark.timeout(300)
def test_tensorflow_io_still_aborts_at_exit():
  # Canary for register_filesystems() and the runners' os._exit: if this starts exiting 0,
  # the workaround can go.
  pytest.importorskip("tensorflow_io")
  moto_server = pytest.importorskip("moto.server")
  server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
  server.start()
  try:
    endpoint = f"http://127.0.0.1:{server._server.server_address[1]}"
    code = """
      import tensorflow as tf
      import tensorflow_io
      print(tf.io.gfile.exists("s3://bucket/x"))
      """
    proc = run_python(
      code,
      env=project_env(
        S3_ENDPOINT=endpoint,
        S3_USE_HTTPS="0",
        AWS_ACCESS_KEY_ID="x",
        AWS_SECRET_ACCESS_KEY="x",
        AWS_REGION="us-east-1",
      ),
      timeout=240,
    )
  finally:
    server.stop()
  assert proc.stdout.split()[-1:] == ["False"], proc.stderr[-2000:]
  assert proc.returncode != 0 and "pure virtual method called" in proc.stderr


def test_strategy_scopes_still_refuse_to_nest_unless_yielding():
  # Canary for yielding_scope(): TensorFlow refuses another strategy's scope inside one.
  trainer = tf.distribute.OneDeviceStrategy("/cpu:0")
  module = tf.distribute.MirroredStrategy(["/cpu:0"])
  with trainer.scope(), pytest.raises(RuntimeError, match="Mixing different"), module.scope():
    pass
  with tf_compat.yielding_scope(trainer) as record:
    assert tf.distribute.get_strategy() is trainer
    with module.scope():
      assert tf.distribute.get_strategy() is module
      model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    # The trainer's scope stays closed after the module's strategy took over.
    assert not tf.distribute.has_strategy()
  assert record.module_strategy is module and record.strategy is module
  assert model.distribute_strategy is module
  assert not tf.distribute.has_strategy()


def test_yielding_scope_keeps_the_trainers_strategy_for_modules_that_take_it():
  trainer = tf.distribute.OneDeviceStrategy("/cpu:0")
  scope_method = type(trainer).__mro__[2].scope
  with tf_compat.yielding_scope(trainer) as record:
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.fit(tf.zeros((8, 2)), tf.zeros((8, 1)), epochs=1, verbose=0)
    # Entering the trainer's own scope again, as Keras does in fit, changes nothing.
    with trainer.scope():
      assert tf.distribute.get_strategy() is trainer
  assert record.module_strategy is None and record.strategy is trainer
  assert model.distribute_strategy is trainer
  assert type(trainer).__mro__[2].scope is scope_method  # The wrapper is gone.


def test_yielding_scope_lets_a_custom_loop_step_with_its_own_strategy():
  trainer = tf.distribute.OneDeviceStrategy("/cpu:0")
  with tf_compat.yielding_scope(trainer) as record:
    module = tf.distribute.MirroredStrategy(["/cpu:0"])
    with module.scope():
      weight = tf.Variable(1.0)
      optimizer = tf.keras.optimizers.SGD(0.5)

    @tf.function
    def step():
      def replica_fn():
        with tf.GradientTape() as tape:
          loss = weight * weight
        optimizer.apply_gradients([(tape.gradient(loss, weight), weight)])
        return loss

      return module.run(replica_fn)

    step()
  assert record.module_strategy is module
  assert float(weight.numpy()) == pytest.approx(0.0)


@pytest.fixture
def no_tfx_package(monkeypatch):
  """Stock TFX builds a 49 MB TFX sdist (7 s) for executors given Beam options; not needed here."""
  from tfx.utils import dependency_utils

  monkeypatch.setattr(dependency_utils, "build_ephemeral_package", lambda: "/nowhere/tfx.tar.gz")


@pytest.mark.usefixtures("no_tfx_package")
def test_beam_pipeline_args_are_still_where_tfx_keeps_them():
  from tfx.dsl.components.base import base_beam_executor

  context = base_beam_executor.BaseBeamExecutor.Context(
    beam_pipeline_args=["--runner=DirectRunner", "--direct_num_workers=2"]
  )
  from tfx.components.statistics_gen import executor as stock

  executor = stock.Executor(context)
  assert tf_compat.beam_pipeline_args(executor)[:2] == [
    "--runner=DirectRunner",
    "--direct_num_workers=2",
  ]


@pytest.mark.usefixtures("no_tfx_package")
def test_tfx_private_hooks_are_still_where_tf_compat_reads_them():
  from tfx.dsl.components.base import base_beam_executor
  from tfx.orchestration.portable import tfx_runner

  context = base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=["--a=1"])
  from tfx.components.statistics_gen import executor as stock

  executor = stock.Executor(context)
  tf_compat.set_beam_pipeline_args(executor, ["--b=2"])
  assert tf_compat.beam_pipeline_args(executor) == ["--b=2"]
  assert tf_compat.executor_context(executor) is context
  assert callable(tfx_runner._make_pipeline_proto)
  assert callable(tf_compat.kfp_v2_executor_flags_parser())


def test_user_module_wheels_are_pip_installed_at_every_use_unless_patched(tmp_path, monkeypatch):
  import pathlib

  from tfx.components.util import udf_utils
  from tfx.utils import import_utils

  module = tmp_path / "src" / "kit_install_once_module.py"
  module.parent.mkdir()
  module.write_text("def answer():\n  return 42\n")
  wheel, module_path = udf_utils.package_user_module_file(
    "Once", str(module), str(tmp_path / "root")
  )
  pip_runs = []
  check_call = subprocess.check_call

  def counted(command, **kwargs):
    pip_runs.append(command)
    return check_call(command, **kwargs)

  monkeypatch.setattr(subprocess, "check_call", counted)
  # Restored after the test, as is the cache of installed wheels.
  monkeypatch.setattr(udf_utils, "install_to_temp_directory", udf_utils.install_to_temp_directory)
  monkeypatch.setattr(tf_compat, "_INSTALLED_WHEELS", {})
  if not getattr(udf_utils.install_to_temp_directory, "_tf_compat", False):
    # Stock TFX: one pip process per context.
    for _ in range(2):
      with udf_utils.TempPipInstallContext([wheel]):
        pass
    assert len(pip_runs) == 2
    pip_runs.clear()
  assert tf_compat.install_user_modules_once()
  folders = []
  for _ in range(3):
    with udf_utils.TempPipInstallContext([wheel]) as context:
      folders.append(context.temp_directory)
      assert (pathlib.Path(context.temp_directory) / "kit_install_once_module.py").is_file()
  # A module path ("name@wheel"), as the components' exec properties hold it, goes the same way.
  assert import_utils.import_func_from_module(module_path, "answer")() == 42
  assert len(pip_runs) == 1 and len(set(folders)) == 3


def test_beam_executors_package_tfx_for_any_beam_argument_unless_patched(monkeypatch):
  from tfx.components.statistics_gen import executor as stock
  from tfx.dsl.components.base import base_beam_executor
  from tfx.utils import dependency_utils

  package = "/nowhere/tfx_ephemeral-1.16.0.tar.gz"
  builds = []

  def build():
    builds.append(package)
    return package

  # Counted instead of built (7 s and 49 MB each); restored after the test, as is the patch.
  monkeypatch.setattr(dependency_utils, "build_ephemeral_package", build)
  monkeypatch.setattr(
    dependency_utils, "make_beam_dependency_flags", dependency_utils.make_beam_dependency_flags
  )

  def executor_args(*beam: str) -> list[str]:
    context = base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=list(beam))
    return tf_compat.beam_pipeline_args(stock.Executor(context))

  local = ("--direct_running_mode=multi_processing", "--direct_num_workers=2")
  if not getattr(dependency_utils.make_beam_dependency_flags, "_tf_compat", False):
    # Stock TFX: the DirectRunner's own processes get a TFX package too.
    assert f"--extra_package={package}" in executor_args(*local)
    assert len(builds) == 1
    builds.clear()
  assert tf_compat.tfx_package_only_for_remote_beam()
  for args in (local, ("--runner=DirectRunner",), ("--runner=direct", "--direct_num_workers=2")):
    assert not any(a.startswith("--extra_package") for a in executor_args(*args)), args
  assert builds == []
  # A runner off this machine still gets it, unless the user named the dependencies.
  assert f"--extra_package={package}" in executor_args("--runner=DataflowRunner", "--project=p")
  assert len(builds) == 1
  remote = ("--runner=FlinkRunner", "--sdk_container_image=registry.example/kit:1")
  assert not any(a.startswith("--extra_package") for a in executor_args(*remote))
  assert len(builds) == 1
