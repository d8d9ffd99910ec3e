"""Tests of the Optimizer's formats: the registry, and what each format converts or refuses."""

import dataclasses
import json
import sys

import numpy as np
import pytest
import tensorflow as tf

from components.artifact_files import variant_index
from components.optimizer import data_lib, formats, optimizer_lib, report, run_config
from components.optimizer.formats import (
  fine_tuning,
  keras_model,
  runtime_base,
  tflite,
  variant_base,
)
from components.optimizer.formats import onnx as onnx_format
from components.optimizer.formats import tensorrt as trt_format
from core import defaults
from core.errors import UserInputError
from models.tabular import layers as preprocessing_layers
from tests.support.optimizer_models import (
  build_model,
  by_name,
  facts,
  keras_outputs,
  quick,
  run,
  sample,
  train,
)

NEEDS_NO_TENSORRT = pytest.mark.skipif(
  trt_format.unavailable_reason() is None, reason="this host can build TensorRT engines"
)

# A format the kit does not ship, as a contributor would add one: this one file, and its module
# in formats.FORMAT_MODULES. It ships the baseline as a Keras h5 file, run by TensorFlow.
H5_FORMAT = """
import os

import tensorflow as tf

from components.optimizer import formats
from components.optimizer.formats import runtime_base
from components.optimizer.formats.variant_base import Conversion, Variant


@formats.register
class KerasH5Variant(Variant):
  name = "keras_h5"
  runtime = runtime_base.KerasRuntime.name

  def convert(self, context, out_dir):
    context.load_baseline().save(os.path.join(out_dir, "model.h5"), include_optimizer=False)
    return Conversion(["model.h5"], {"format": "h5"})

  def load(self, out_dir, conversion):
    path = os.path.join(out_dir, conversion.model_files[0])
    return runtime_base.KerasRuntime(tf.keras.models.load_model(path, compile=False))
"""


@pytest.fixture(scope="module")
def data():
  """(train inputs, train labels, eval inputs, eval labels) of the multiclass data."""
  return (*sample("multiclass", 800, 1), *sample("multiclass", 300, 2))


def test_a_new_format_is_one_module_and_one_registry_line(tmp_path, monkeypatch, data):
  (tmp_path / "keras_h5_format.py").write_text(H5_FORMAT)
  monkeypatch.syspath_prepend(str(tmp_path))
  # The registry as it was after the test, whatever the new module registers.
  monkeypatch.setattr(formats, "VARIANTS", dict(formats.VARIANTS))
  with pytest.raises(UserInputError, match="Unknown optimizer variant 'keras_h5'"):
    quick(["keras_h5"]).validate()
  monkeypatch.setattr(formats, "FORMAT_MODULES", [*formats.FORMAT_MODULES, "keras_h5_format"])
  output_dir = tmp_path / "optimized"
  output_dir.mkdir()
  try:
    model = build_model("multiclass", data[0])
    result = run(model, data, str(output_dir), quick([defaults.TFLITE_FLOAT32, "keras_h5"]))
  finally:
    sys.modules.pop("keras_h5_format", None)
  # The same loop converted, measured, gated and indexed it, after the kit's own variants.
  entries = by_name(result)
  assert list(entries) == [defaults.TFLITE_FLOAT32, "keras_h5"]
  entry = entries["keras_h5"]
  assert entry["status"] == "ok", entry.get("reason")
  assert (entry["runtime"], entry["path"]) == ("tensorflow", "keras_h5/model.h5")
  assert entry["details"] == {"format": "h5"}
  assert entry["agreement"] == 1.0 and entry["blessed"] is True
  assert entry["size_bytes"] == (output_dir / "keras_h5" / "model.h5").stat().st_size
  signature = json.loads((output_dir / "keras_h5" / "signature.json").read_text())
  assert (signature["variant"], signature["model_file"]) == ("keras_h5", "model.h5")
  assert [i["name"] for i in signature["inputs"]] == ["numeric", "text_color"]
  index, blessed = variant_index.read_index(str(output_dir))
  assert index["variants"]["keras_h5"]["signature"] == signature
  assert "keras_h5" in [v.name for v in blessed]
  assert "| keras_h5 | ok | tensorflow |" in report.markdown(result)


def test_a_missing_back_end_names_what_to_install(tmp_path, monkeypatch):
  with pytest.raises(
    formats.BackendMissingError, match=r"^no_such_backend not installed: pip install \.\[gpu\]$"
  ):
    formats.backend("no_such_backend.driver", ".[gpu]")
  # Installed but broken: the import's own error says which library is missing.
  (tmp_path / "broken_backend.py").write_text('raise ImportError("libbroken.so: not found")\n')
  monkeypatch.syspath_prepend(str(tmp_path))
  with pytest.raises(formats.BackendMissingError, match=r"broken_backend does not import \("):
    formats.backend("broken_backend", "broken-backend")
  assert formats.backend("numpy", "numpy") is np


def test_create_refuses_an_unknown_variant():
  with pytest.raises(ValueError, match=r"Unknown optimizer variant 'tflite_int4'; choose from \["):
    formats.create("tflite_int4")
  assert isinstance(formats.create(defaults.ONNX), onnx_format.OnnxVariant)


def test_qat_variant_on_a_numeric_only_model(tmp_path):
  train_inputs, train_labels = sample("multiclass", 400, 1)
  eval_inputs, eval_labels = sample("multiclass", 200, 2)
  numbers = train_inputs["numeric"]
  tf.keras.utils.set_random_seed(0)
  numeric = tf.keras.Input((3,), name="numeric")
  x = preprocessing_layers.NumericPreprocessing(
    np.nanmean(numbers, 0), np.nanstd(numbers, 0), np.isnan(numbers).any(0)
  )(numeric)
  x = tf.keras.layers.Dense(32, activation="relu")(x)
  model = tf.keras.Model({"numeric": numeric}, tf.keras.layers.Dense(3, activation="softmax")(x))
  model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
  model.fit({"numeric": numbers}, train_labels, epochs=5, batch_size=64, verbose=0)
  result = optimizer_lib.optimize(
    model,
    {"numeric": numbers},
    {"numeric": eval_inputs["numeric"]},
    eval_labels,
    str(tmp_path),
    run_config.ModelFacts(task="multiclass", label_key="label"),
    quick([defaults.QAT], min_fine_tune_steps=50, fine_tune_epochs=1),
  )
  entry = result["variants"][0]
  assert entry["status"] == "ok", entry.get("reason")
  assert entry["details"]["qat_scope"] == "dense_and_convolution_layers"
  assert entry["details"]["tflite_mode"] == "int8"


@NEEDS_NO_TENSORRT
def test_unavailable_reason_names_the_missing_pieces(monkeypatch):
  monkeypatch.setattr(trt_format.importlib.util, "find_spec", lambda name: None)
  reason = trt_format.unavailable_reason()
  assert reason.startswith("tensorrt Python package not installed: pip install .[tensorrt]")


def test_an_op_without_a_builtin_converts_with_select_tf_ops(tmp_path, data):
  # TFLite has no builtin Softsign: the conversion retries with Select TF ops and says so.
  softsign = train("multiclass", data[0], data[1], epochs=3, activation="softsign")
  config = quick([defaults.TFLITE_FLOAT32, defaults.ONNX])
  result = run(softsign, data, str(tmp_path), config)
  entries = by_name(result)
  entry = entries[defaults.TFLITE_FLOAT32]
  assert entry["status"] == "ok", entry.get("reason")
  assert entry["select_tf_ops"] is True
  assert entry["details"]["op_sets"] == ["TFLITE_BUILTINS", "SELECT_TF_OPS"]
  assert entry["agreement"] == 1.0
  assert variant_index.read_index(str(tmp_path))[0]["variants"]["tflite_float32"]["select_tf_ops"]
  assert entries[defaults.ONNX]["select_tf_ops"] is False


def test_float16_refuses_constants_beyond_its_range():
  numeric = tf.keras.Input((1,), name="numeric")
  layer = preprocessing_layers.NumericPreprocessing([1e6], [1e5], [False], name="big")
  model = tf.keras.Model({"numeric": numeric}, tf.keras.layers.Dense(1)(layer(numeric)))
  with pytest.raises(
    variant_base.ConversionRefused, match="layer 'big' holds values up to 1e\\+06, beyond float16"
  ):
    tflite.check_float16_range(model)


def test_representative_dataset_yields_single_row_dicts(data):
  rows = list(tflite.representative_dataset(data[0], 7)())
  assert len(rows) == 7
  assert set(rows[0]) == {"numeric", "text_color"}
  assert rows[0]["numeric"].shape == (1, 3) and rows[0]["numeric"].dtype == np.float32
  # Text as numpy bytes: given Python objects the calibration would see every value as OOV.
  assert rows[0]["text_color"].shape == (1, 1) and rows[0]["text_color"].dtype.kind == "S"


def test_fine_tuning_leaves_no_graph_in_the_global_gradient_registry(data):
  # Model.fit registers a tf.custom_gradient per trace in this process-wide registry, which keeps
  # every traced training graph alive; fine_tune must not (this was a ~25 MB per run leak).
  from tensorflow.python.framework import ops

  def custom_gradients() -> int:
    return sum(1 for key in ops._gradient_registry.list() if key.startswith("CustomGradient"))

  before = custom_gradients()
  model = build_model("multiclass", data[0])
  targets = keras_outputs(model, runtime_base.take(data[0], 0, 256))
  pruned = fine_tuning.prune(
    model,
    runtime_base.take(data[0], 0, 256),
    targets,
    target_sparsity=0.5,
    epochs=1,
    batch_size=32,
    learning_rate=1e-3,
  )
  assert fine_tuning.kernel_sparsity(pruned)["overall"] >= 0.49
  assert custom_gradients() == before
  tf.keras.backend.clear_session()


def taxi_like_sample(rows: int, seed: int):
  """Inputs as TFX's taxi module's model takes them: named [n, 1] float32 and int32 columns.

  The label is `miles_xf + company_xf / 10 > 0.7`; rows within 0.05 of the bound are left out,
  so that no row lies on the model's decision boundary (where int8's rounding may flip it).
  """
  rng = np.random.default_rng(seed)
  miles = rng.uniform(0, 1, (rows, 1)).astype(np.float32)
  company = rng.integers(0, 5, (rows, 1)).astype(np.int32)
  score = miles[:, 0] + company[:, 0] / 10
  keep = np.abs(score - 0.7) > 0.05
  labels = score > 0.7
  return {"miles_xf": miles[keep], "company_xf": company[keep]}, labels[keep].astype(np.int64)


def test_a_model_saved_with_tf_saved_model_save_converts_from_its_inference_function(tmp_path):
  train_inputs, train_labels = taxi_like_sample(800, 1)
  eval_inputs, eval_labels = taxi_like_sample(300, 2)
  tf.keras.utils.set_random_seed(0)
  inputs = {
    "miles_xf": tf.keras.Input((1,), name="miles_xf"),
    "company_xf": tf.keras.Input((1,), dtype=tf.int32, name="company_xf"),
  }
  # Not one-hot: TFLite's int8 ONE_HOT reads its off value with the wrong scale (0.5, not 0).
  company = tf.keras.layers.Lambda(lambda c: tf.cast(c, tf.float32) / 4)(inputs["company_xf"])
  x = tf.keras.layers.concatenate([inputs["miles_xf"], company])
  x = tf.keras.layers.Dropout(0.5)(tf.keras.layers.Dense(32, activation="relu")(x))
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(1, activation="sigmoid")(x))
  model.compile(tf.keras.optimizers.Adam(0.02), "binary_crossentropy", steps_per_execution=10)
  model.fit(train_inputs, train_labels, epochs=40, batch_size=64, verbose=0)
  serving_dir = str(tmp_path / "serving")
  serve = tf.function(lambda features: {"outputs": model(features)})
  specs = {k: tf.TensorSpec([None, 1], v.dtype, name=k) for k, v in inputs.items()}
  tf.saved_model.save(model, serving_dir, signatures=serve.get_concrete_function(specs))

  restored = data_lib.load_keras_model(serving_dir)
  assert keras_model.restored_call(restored) is not None
  assert {k: s.dtype for k, s in data_lib.input_specs(restored).items()} == {
    "miles_xf": tf.float32,
    "company_xf": tf.int32,
  }
  # The inference function (training=False): Dropout is off, outputs are the model's own.
  expected = model.predict(eval_inputs, verbose=0)
  np.testing.assert_allclose(keras_outputs(restored, eval_inputs), expected, atol=1e-6)

  output_dir = tmp_path / "optimized"
  output_dir.mkdir()
  converted = (*variants_of("tflite"), defaults.ONNX)
  config = quick([*converted, defaults.PRUNED, defaults.PRUNED_INT8, defaults.QAT])
  binary = dataclasses.replace(facts("binary"), columns={}, missing={})
  result = optimizer_lib.optimize(
    restored, train_inputs, eval_inputs, eval_labels, str(output_dir), binary, config
  )
  assert result["baseline"]["accuracy"] == float(np.mean((expected[:, 0] >= 0.5) == eval_labels))
  entries = by_name(result)
  for name in converted:
    assert entries[name]["status"] == "ok", (name, entries[name].get("reason"))
    assert entries[name]["agreement"] >= 0.99, (name, entries[name]["agreement"])
  for name in (defaults.PRUNED, defaults.PRUNED_INT8, defaults.QAT):
    assert entries[name]["status"] == "skipped"
    assert (
      "which keeps no Keras config: save with model.save(fn_args.serving_model_dir, "
      in (entries[name]["reason"])
    )
  signature = json.loads((output_dir / "tflite_int8" / "signature.json").read_text())
  assert {i["name"]: (i["dtype"], i["columns"]) for i in signature["inputs"]} == {
    "miles_xf": ("float32", ["miles_xf"]),
    "company_xf": ("int32", ["company_xf"]),
  }


def variants_of(prefix: str) -> tuple[str, ...]:
  return tuple(v for v in defaults.VARIANTS if v.startswith(prefix))


def test_a_call_function_to_choose_by_guessing_is_refused(tmp_path):
  module = tf.Module()
  module.scale = tf.Variable(2.0)
  module.__call__ = tf.function(lambda x: x * module.scale)
  module.__call__(tf.zeros([2, 1]))
  module.__call__(tf.zeros([2, 3]))
  tf.saved_model.save(module, str(tmp_path))
  with pytest.raises(data_lib.OptimizerInputError, match="has 2 call functions and no training"):
    data_lib.load_keras_model(str(tmp_path))


def test_int8_refuses_a_graph_the_converter_crashes_on(tmp_path):
  # Keras' CategoryEncoding is DenseBincount, which TensorFlow 2.16's int8 converter segfaults on.
  code = tf.keras.Input((1,), dtype=tf.int32, name="code")
  encoded = tf.keras.layers.CategoryEncoding(num_tokens=4)(code)
  model = tf.keras.Model({"code": code}, tf.keras.layers.Dense(2)(encoded))
  exported = keras_model.export_saved_model(model, str(tmp_path / "export"))
  sample_inputs = {"code": np.array([[0], [3]], np.int32)}
  representative = tflite.representative_dataset(sample_inputs, 2)
  with pytest.raises(
    variant_base.ConversionRefused, match=r"\['DenseBincount'\].*crashes the TFLite converter"
  ):
    tflite.to_tflite(exported, tflite.INT8, representative)
  content, _ = tflite.to_tflite(exported, tflite.DYNAMIC_RANGE)
  assert content


def test_a_model_with_a_date_column_skips_onnx_with_the_reason():
  """The default model parses dates with TF string ops, which tf2onnx cannot convert."""
  import types

  date = {"column": "date", "kind": "date"}
  number = {"column": "wind", "kind": "numeric"}
  contract = types.SimpleNamespace(inputs=[{"columns": [number]}, {"columns": [date]}])
  with_date = types.SimpleNamespace(contract=contract)
  reason = onnx_format.OnnxVariant().skip_reason(with_date)
  assert reason.startswith("the model parses the column(s) ['date'] from text")
  words = {"column": "title", "kind": "free_text"}
  contract.inputs.append({"columns": [words]})
  reason = onnx_format.OnnxVariant().skip_reason(with_date)
  assert reason.startswith("the model parses the column(s) ['date', 'title'] from text")
  plain = types.SimpleNamespace(contract=types.SimpleNamespace(inputs=[{"columns": [number]}]))
  assert onnx_format.OnnxVariant().skip_reason(plain) is None
  assert onnx_format.OnnxVariant().skip_reason(types.SimpleNamespace(contract=None)) is None


def test_the_savedmodel_runtime_feeds_inputs_whose_names_tensorflow_renames(tmp_path):
  # A column `W.Hnd` (MASS survey) is the model input `text_W.Hnd`; the loaded signature takes
  # it as the argument `text_W_Hnd`, while TF Serving and the batches know `text_W.Hnd`.
  from components import model_contract
  from components.optimizer.formats import savedmodel_pruning

  numbers = tf.keras.Input((2,), name="numeric")
  text = tf.keras.Input((1,), name="text_W.Hnd", dtype=tf.string)
  is_left = tf.cast(tf.equal(text, "Left"), tf.float32)
  output = tf.keras.layers.Concatenate()([numbers, is_left])
  model = tf.keras.Model({"numeric": numbers, "text_W.Hnd": text}, output)
  signature = model_contract.model_inputs_signature(model)
  tf.saved_model.save(model, str(tmp_path), signatures={"model_inputs": signature})
  runtime = savedmodel_pruning.SavedModelRuntime(str(tmp_path), "model_inputs")
  batch = {
    "numeric": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32),
    "text_W.Hnd": np.array([[b"Left"], [b"Right"]], object),
  }
  np.testing.assert_allclose(runtime.predict(batch), [[1, 2, 1], [3, 4, 0]])
  names = [i["name"] for i in runtime.signature()["inputs"]]
  assert names == ["numeric", "text_W.Hnd"]
