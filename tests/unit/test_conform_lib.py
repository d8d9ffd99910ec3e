"""Tonight's examples converted to the column types the live model was trained on
(components/model_scoring/conform_lib.py)."""

import tensorflow as tf

from components.model_scoring import conform_lib


def _example(**features):
  example = tf.train.Example()
  for name, (kind, values) in features.items():
    getattr(example.features.feature[name], kind).value.extend(values)
  return example.SerializeToString()


def _features(record):
  example = tf.train.Example.FromString(record)
  return {
    name: (f.WhichOneof("kind"), list(getattr(f, f.WhichOneof("kind")).value))
    for name, f in example.features.feature.items()
  }


def test_conform_gives_each_changed_column_the_live_models_type():
  record = _example(
    tract=("int64_list", [17031081800]),
    miles=("float_list", [2.5]),
    seconds=("int64_list", [300]),
    code=("bytes_list", [b"12", b"x"]),
    empty=("int64_list", []),
    new=("float_list", [1.0]),
  )
  baseline = {
    "tract": "BYTES",
    "miles": "INT",
    "seconds": "FLOAT",
    "code": "FLOAT",
    "empty": "BYTES",
  }
  [out] = conform_lib.conform_records([record], baseline)
  features = _features(out)
  assert features["tract"] == ("bytes_list", [b"17031081800"])
  assert features["miles"] == ("int64_list", [2])  # rounded to the nearest (half to even)
  assert features["seconds"] == ("float_list", [300.0])
  assert features["code"] == ("float_list", [12.0])  # 'x' is not a number: left out
  assert features["empty"] == ("bytes_list", [])
  assert features["new"] == ("float_list", [1.0])  # unknown to the live model: as it was


def test_conform_leaves_records_alone_when_no_type_changed():
  record = _example(a=("int64_list", [1]))
  assert conform_lib.conform_records([record], {"a": "INT"}) == [record]
  assert conform_lib.conformer({"a": "INT"}, {"a": "INT"}) is None
  assert conform_lib.conformer({"a": "INT"}, None) is None
  conform = conform_lib.conformer({"a": "INT", "b": "BYTES"}, {"a": "BYTES", "b": "BYTES"})
  assert conform.columns == {"a": ("INT", "BYTES")}
  [out] = conform(tf.constant([record])).numpy().tolist()
  assert _features(out)["a"] == ("bytes_list", [b"1"])
