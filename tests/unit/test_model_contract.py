"""model_contract: columns from a schema, tf.Example parsing into inputs, the contract file."""

import math

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from components import model_contract
from components.model_contract import Column
from core import column_types, errors
from core.column_types import STORED_FLOAT32, STORED_INT64, STORED_STRING

COLUMNS = [
  Column("age", STORED_INT64),
  Column("income", STORED_FLOAT32),
  Column("city", STORED_STRING),
]


def _example(**features) -> bytes:
  return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def _ints(*values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _floats(*values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def _bytes(*values):
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in values]))


def _parse(*examples):
  parsed = model_contract.parse_columns(tf.constant(list(examples)), COLUMNS)
  return {k: v.numpy() for k, v in parsed.items()}


def test_numbers_share_one_float_input_and_text_gets_one_input_each():
  out = _parse(_example(age=_ints(41), income=_floats(5.5), city=_bytes("Oslo")))
  assert set(out) == {"numeric", "text_city"}
  assert out["numeric"].dtype == np.float32 and out["numeric"].shape == (1, 2)
  np.testing.assert_array_equal(out["numeric"], [[41.0, 5.5]])
  assert out["text_city"].shape == (1, 1) and out["text_city"][0, 0] == b"Oslo"


def test_int64_becomes_float_exactly_up_to_float32_precision():
  out = _parse(_example(age=_ints(123456789012), income=_floats(1.0), city=_bytes("a")))
  assert out["numeric"][0, 0] == np.float32(123456789012)


def test_missing_values_in_every_stored_form():
  examples = [
    # Absent features.
    _example(),
    # Features with no kind set at all.
    _example(age=tf.train.Feature(), income=tf.train.Feature(), city=tf.train.Feature()),
    # Empty typed lists, as the stock CsvExampleGen writes an empty cell.
    _example(age=_ints(), income=_floats(), city=_bytes()),
  ]
  out = _parse(*examples)
  assert out["numeric"].shape == (3, 2)
  assert np.isnan(out["numeric"]).all()
  assert out["text_city"].tolist() == [[b""], [b""], [b""]]


def test_a_missing_value_does_not_shift_the_other_columns():
  out = _parse(
    _example(income=_floats(2.5), city=_bytes("x")),
    _example(age=_ints(7), city=_bytes()),
  )
  assert math.isnan(out["numeric"][0, 0]) and out["numeric"][0, 1] == 2.5
  assert out["numeric"][1, 0] == 7.0 and math.isnan(out["numeric"][1, 1])
  assert out["text_city"].tolist() == [[b"x"], [b""]]


def test_multi_valued_features_keep_their_first_value():
  out = _parse(_example(age=_ints(3, 4, 5), income=_floats(1.5, 9.0), city=_bytes("a", "b")))
  np.testing.assert_array_equal(out["numeric"], [[3.0, 1.5]])
  assert out["text_city"].tolist() == [[b"a"]]


def test_parse_label_fills_missing_labels():
  records = tf.constant([_example(y=_bytes("cat")), _example()])
  labels = model_contract.parse_label(records, "y", STORED_STRING).numpy()
  assert labels.tolist() == [b"cat", b""]
  records = tf.constant([_example(y=_floats(2.5)), _example(y=_floats())])
  values = model_contract.parse_label(records, "y", STORED_FLOAT32).numpy()
  assert values[0] == 2.5 and math.isnan(values[1])


def _schema(text: str):
  return text_format.Parse(text, schema_pb2.Schema())


SCHEMA = _schema(
  """
  feature { name: "zeta" type: FLOAT }
  feature { name: "id" type: INT }
  feature { name: "label" type: BYTES }
  feature { name: "color name" type: BYTES }
  feature { name: "alpha" type: INT }
  feature { name: "never_set" }
  """
)


def test_columns_from_schema_order_names_and_exclusions():
  columns = model_contract.columns_from_schema(SCHEMA, "label", exclude=("id",))
  assert [(c.name, c.dtype) for c in columns] == [
    ("alpha", "int64"),
    ("zeta", "float32"),
    ("color name", "string"),
  ]
  assert [c.input_name for c in columns] == ["numeric", "numeric", "text_color_name"]
  assert [c.name for c in model_contract.numeric_columns(columns)] == ["alpha", "zeta"]
  assert model_contract.label_dtype(SCHEMA, "label") == "string"


def test_schema_types_read_tensorflow_metadata_names_as_core_column_types_spells_them():
  assert model_contract.schema_types(SCHEMA) == {
    "zeta": "FLOAT",
    "id": "INT",
    "label": "BYTES",
    "color name": "BYTES",
    "alpha": "INT",
  }
  with pytest.raises(model_contract.ContractError, match="'never_set' has no values"):
    model_contract.label_dtype(SCHEMA, "never_set")
  assert set(column_types.SCHEMA_TYPES) <= set(schema_pb2.FeatureType.keys())
  stats_types = set(statistics_pb2.FeatureNameStatistics.Type.keys()) - {"STRUCT"}
  assert set(column_types.STATS_TO_SCHEMA) == stats_types


@pytest.mark.parametrize(
  ("label", "exclude", "message"),
  [
    ("target", (), "label 'target' is not a column of the data; columns are 'alpha'"),
    ("label", ("ID",), "excluded column 'ID' is not a column of the data"),
    ("label", ("zeta", "id", "alpha", "color name"), "no feature columns are left"),
  ],
)
def test_columns_from_schema_errors_are_user_errors(label, exclude, message):
  with pytest.raises(model_contract.ContractError, match=message) as raised:
    model_contract.columns_from_schema(SCHEMA, label, exclude=exclude)
  assert isinstance(raised.value, errors.UserInputError)


def test_text_columns_that_map_to_one_input_name_are_refused():
  schema = _schema('feature { name: "a b" type: BYTES } feature { name: "a_b" type: BYTES }')
  with pytest.raises(model_contract.ContractError, match="map to the same model input name"):
    model_contract.columns_from_schema(schema)


def test_names_in_other_scripts_are_distinct_model_inputs():
  """'年龄' and '收入' were both '__' (every character not ASCII became '_'), so any two names of
  one length in Chinese, Cyrillic or Greek clashed; a Latin letter is still '_'."""
  schema = _schema('feature { name: "年龄" type: BYTES } feature { name: "收入" type: BYTES }')
  columns = model_contract.columns_from_schema(schema)
  assert [c.input_name for c in columns] == ["text_u5e74u9f84", "text_u6536u5165"]
  assert [model_contract.rows_key(c.name) for c in columns] == ["u5e74u9f84", "u6536u5165"]
  assert model_contract.safe_name("Fläche m²") == "Fl_che_m_"
  assert model_contract.name_clashes(["年龄", "收入", "цена", "кол"]) == []
  assert model_contract.name_clashes(["label", "kids 5", "kids_5"]) == ["kids 5", "kids_5"]


def test_contract_file_round_trip(tmp_path):
  assert model_contract.read_contract(str(tmp_path)) is None
  contract = model_contract.ModelContract(
    task="binary",
    label={"key": "diagnosis", "task": "binary", "classes": ["benign", "malignant"]},
    inputs=[{"name": "numeric", "dtype": "float32", "shape": [-1, 2], "columns": []}],
    output=model_contract.output_meaning("binary", ["benign", "malignant"]),
  )
  path = model_contract.write_contract(str(tmp_path), contract)
  assert path == str(tmp_path / "assets.extra" / "contract.json")
  assert model_contract.read_contract(str(tmp_path)) == contract
  assert "'malignant' (label.classes[1])" in contract.output
  assert contract.to_json()["format"] == model_contract.CONTRACT_FORMAT


def test_a_column_named_self_saves_and_serves_under_its_recorded_rows_key(tmp_path):
  # Ecdat's Hmda has a column `self` (self-employed): as a signature input named `self`, saving
  # the SavedModel failed with "got multiple values for argument 'self'".
  columns = [Column("self", STORED_INT64), Column("dir", STORED_FLOAT32)]
  assert [model_contract.rows_key(c.name) for c in columns] == ["self_", "dir"]
  numbers = tf.keras.Input((2,), name=model_contract.NUMERIC_INPUT)
  model = tf.keras.Model({model_contract.NUMERIC_INPUT: numbers}, tf.keras.layers.Dense(1)(numbers))
  signatures = {
    "serving_default": model_contract.examples_signature(model, columns),
    model_contract.ROWS_SIGNATURE: model_contract.rows_signature(model, columns),
  }
  tf.saved_model.save(model, str(tmp_path), signatures=signatures)
  loaded = tf.saved_model.load(str(tmp_path))
  by_name = loaded.signatures[model_contract.ROWS_SIGNATURE](
    self_=tf.constant([1.0, 0.0]), dir=tf.constant([0.25, 0.5])
  )["outputs"]
  examples = [_example(self=_ints(1), dir=_floats(0.25)), _example(self=_ints(0), dir=_floats(0.5))]
  served = loaded.signatures["serving_default"](examples=tf.constant(examples))["outputs"]
  np.testing.assert_allclose(by_name.numpy(), served.numpy(), atol=1e-6)


def _examples(uri: str, span: int, input_fingerprint: str, digests: dict | None):
  import json

  from tfx.types import standard_artifacts

  from core import properties

  artifact = standard_artifacts.Examples()
  artifact.uri, artifact.span = uri, span
  artifact.set_string_custom_property("input_fingerprint", input_fingerprint)
  if digests is not None:
    artifact.set_string_custom_property(properties.EXAMPLES_SPAN_DIGESTS, json.dumps(digests))
  return artifact


def test_a_span_copied_again_unchanged_is_the_same_data():
  # The delivery job copies span 2's file again: new times, so TFX's input fingerprint and
  # the Examples artifact are new, but the lines are the same. A run on them learns nothing
  # new (the Pusher keeps the live version, and a rollback away from it stays rolled back).
  digest = {"2": {"rows": 1500, "digest": "74d9fac259d9d9bc"}}
  before = _examples("/a/1", 2, "split:*,num_files:1,total_bytes:9,xor_checksum:1,sum:1", digest)
  copied = _examples("/a/2", 2, "split:*,num_files:1,total_bytes:9,xor_checksum:7,sum:7", digest)
  assert model_contract.data_fingerprints([copied]) == model_contract.data_fingerprints([before])
  changed = _examples("/a/3", 2, "x", {"2": {"rows": 1500, "digest": "0000000000000001"}})
  assert model_contract.data_fingerprints([changed]) != model_contract.data_fingerprints([before])
  other_span = _examples("/a/4", 3, "x", {"3": digest["2"]})
  assert model_contract.data_fingerprints([other_span]) != model_contract.data_fingerprints(
    [before]
  )
  # Examples without the digests (a stock ExampleGen's): TFX's input fingerprint, else the URI.
  stock = _examples("/a/5", 2, "fp", None)
  assert model_contract.data_fingerprints([stock]) == ["span=2;fp"]
