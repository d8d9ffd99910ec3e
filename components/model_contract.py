"""The model artifact contract: where a trained model lives, what it takes, what it returns.

One owner for three things every component reads:
  - the layout of a Model artifact (`Format-Serving/`, TFX's own path, and the contract file
    the trainer writes beside the SavedModel, `Format-Serving/assets.extra/contract.json`), and
    the module that built it (imported before its Keras model is loaded);
  - the raw columns of a schema (their schema types, `schema_types`, and stored types, by
    core.column_types' tables) and how a serialized tf.Example becomes model inputs (one
    [batch, 1] tensor per column; a missing value is NaN for numbers, '' for text);
  - Keras input names for columns (columns may hold characters TensorFlow rejects in names).

TensorFlow is imported lazily, so the pipeline's runners can import this module cheaply.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from core import properties, tasks
from core.column_types import (
  SCHEMA_TO_STORED,
  SCHEMA_TYPES,
  STORED_FLOAT32,
  STORED_INT64,
  STORED_STRING,
)
from core.errors import UserInputError

SERVING_DIR = "Format-Serving"
CONTRACT_FILE = os.path.join("assets.extra", "contract.json")
CONTRACT_FORMAT = "tfx-pipeline-kit.model-contract/1"
SERVING_INPUT = "examples"
SERVING_OUTPUT = "outputs"
# The serving signature (serialized tf.Examples in) and the preprocessing signature (the
# features and the label as the model sees them) a Model exports; TFMA's ModelSpec names both.
SERVING_SIGNATURE = "serving_default"
TRANSFORM_SIGNATURE = "transform_features"
# The concatenation a model's preprocessing ends in; each member of an ensemble has its own,
# named with its suffix (`preprocessed_m0`, ...). The Optimizer keeps what feeds it in float
# under int8.
PREPROCESSED_LAYER = "preprocessed"
# How an ensemble member's layers are named: the layer's own name, then this suffix.
MEMBER_SUFFIX = "_m{index}"
MEMBER_SUFFIX_PATTERN = r"_m(\d+)"  # group 1: the member's index
# A signature taking one named value per raw column (TF Serving's JSON `instances`).
ROWS_SIGNATURE = "rows"
# A signature taking the Keras model's own inputs by name (what the Optimizer measures).
MODEL_INPUTS_SIGNATURE = "model_inputs"

# How the model takes a column: in the numeric input, or as a text input of its own.
NUMERIC = "numeric"
CATEGORICAL = "categorical"

_NAME_OK = re.compile(r"[^A-Za-z0-9_.\-]")
_LATIN_END = 0x24F  # The last Latin Extended-B character.


class ContractError(UserInputError):
  """A model, schema or column set does not fit the contract; the message names the fix."""


# The model input holding every numeric column, [batch, n]; text columns are one input each.
NUMERIC_INPUT = "numeric"
TEXT_PREFIX = "text_"


@dataclasses.dataclass(frozen=True)
class Column:
  """One raw column as stored in the Examples.

  Attributes:
    name: the column (feature) name.
    dtype: its stored type, STORED_INT64, STORED_FLOAT32 or STORED_STRING.
  """

  name: str
  dtype: str

  @property
  def kind(self) -> str:
    return CATEGORICAL if self.dtype == STORED_STRING else NUMERIC

  @property
  def input_name(self) -> str:
    """The model input the column feeds (all numeric columns share NUMERIC_INPUT)."""
    return NUMERIC_INPUT if self.kind == NUMERIC else TEXT_PREFIX + safe_name(self.name)


# Saving a SavedModel passes each signature input as a keyword argument to a method of
# TensorFlow's (signature_serialization.canonicalize_signatures), so an input named `self`
# fails with "got multiple values for argument 'self'". Ecdat's Hmda has a column `self`.
_TAKEN_KEYS = frozenset({"self"})


def rows_key(column: str) -> str:
  """The column's input name in the SavedModel's `rows` signature (TF Serving's JSON key): the
  column's name where TensorFlow allows it; the contract records it as `rows_input`."""
  name = safe_name(column)
  if not name[:1].isalnum():
    return f"c{name}"
  return f"{name}_" if name in _TAKEN_KEYS else name


def safe_name(column: str) -> str:
  """A TensorFlow-safe name for a column (letters, digits, '_', '.', '-').

  Other ASCII and Latin characters become '_' ('Fläche m²' is 'Fl_che_m_'); a character of
  another script becomes its code point ('年龄' is 'u5e74u9f84'), so that two names in Chinese,
  Cyrillic or Greek of the same length are not one name of underscores.
  """
  spelled = "".join(f"u{ord(c):04x}" if ord(c) > _LATIN_END else c for c in column)
  return _NAME_OK.sub("_", spelled)


def name_clashes(columns: Sequence[str]) -> list[str]:
  """The first two of `columns` whose `rows_key` is one name, or [] (the pre-flight check of
  what `columns_from_schema` refuses for any column types)."""
  return _first_clash((column, [rows_key(column)]) for column in columns)


def _first_clash(keys_of: Iterable[tuple[str, Iterable[str]]]) -> list[str]:
  """The first two columns of (column, its input names) pairs that share an input name, or []."""
  seen: dict[str, str] = {}
  for column, keys in keys_of:
    for key in keys:
      if key in seen:
        return [seen[key], column]
      seen[key] = column
  return []


def clash_error(clashes: Sequence[str]) -> str:
  """The one line for columns that map to the same model input name."""
  return (
    f"columns {list(clashes)} map to the same model input name; rename one of them in the CSV "
    "header."
  )


def numeric_columns(columns: Sequence[Column]) -> list[Column]:
  """The numeric columns in the order they sit in the NUMERIC_INPUT vector."""
  return [c for c in columns if c.kind == NUMERIC]


def data_fingerprints(examples) -> list[str]:
  """What identifies the data of Examples artifacts: the span and the content of each.

  The content is the ExampleGen's digest of each span's lines (`span_digests`), where it
  recorded one: a span's files copied again unchanged (new times, so TFX's input fingerprint
  and a new Examples artifact) hold the same data, and a run on them learns nothing new. Else
  TFX's input fingerprint (the files' names, sizes and times), else the artifact's URI.
  """
  out = []
  for a in examples:
    span = a.span if a.has_property("span") else None
    if a.has_custom_property(properties.EXAMPLES_SPAN_DIGESTS):
      digests = json.loads(a.get_string_custom_property(properties.EXAMPLES_SPAN_DIGESTS))
      if digests:
        out.append(f"span={span};content={json.dumps(digests, sort_keys=True)}")
        continue
    fingerprint = (
      a.get_string_custom_property("input_fingerprint")
      if a.has_custom_property("input_fingerprint")
      else ""
    )
    out.append(f"span={span};{fingerprint or a.uri}")
  return sorted(out)


def serving_dir(model_uri: str) -> str:
  """The SavedModel folder of a Model artifact (TFX's `Format-Serving`)."""
  from tfx.utils import path_utils

  return path_utils.serving_model_dir(model_uri)


def read_schema(schema_path: str):
  """Parses a schema.pbtxt (local path or any file-system URI TensorFlow reads)."""
  from tensorflow_metadata.proto.v0 import schema_pb2
  from tfx.utils import io_utils

  return io_utils.parse_pbtxt_file(schema_path, schema_pb2.Schema())


def schema_file(schema_uri: str) -> str:
  """The schema.pbtxt inside a Schema artifact folder."""
  from tfx.utils import io_utils

  return io_utils.get_only_uri_in_dir(schema_uri)


def columns_from_schema(
  schema, label_key: str | None = None, exclude: Sequence[str] = ()
) -> list[Column]:
  """The model's raw columns: every typed schema feature except the label and `exclude`.

  Numeric columns are ordered by name (their order in the NUMERIC_INPUT vector), then text
  columns by name.

  Args:
    schema: a tensorflow_metadata Schema.
    label_key: the label column, left out (and required to be in the schema), or None.
    exclude: columns left out (`--exclude-columns`); each must be in the schema.

  Returns:
    Columns sorted by name (a stable input order for every converted model).

  Raises:
    ContractError: when the label or an excluded column is not in the schema, or nothing is
      left to learn from.
  """
  typed = {n: SCHEMA_TO_STORED[t] for n, t in schema_types(schema).items()}
  names = sorted(f.name for f in schema.feature)
  for key, what in [(label_key, "label"), *((c, "excluded column") for c in exclude)]:
    if key is not None and key not in names:
      raise ContractError(
        f"{what} {key!r} is not a column of the data; columns are {_short_list(names)}."
      )
  skip = {label_key, *exclude}
  columns = [Column(n, typed[n]) for n in sorted(typed) if n not in skip]
  columns.sort(key=lambda c: (c.kind != NUMERIC, c.name))
  if not columns:
    raise ContractError(
      f"no feature columns are left besides the label {label_key!r}; keep at least one column "
      "(check --exclude-columns)."
    )
  clashes = _clashes(columns)
  if clashes:
    raise ContractError(clash_error(clashes))
  return columns


def _clashes(columns: Sequence[Column]) -> list[str]:
  return _first_clash(
    (c.name, {rows_key(c.name), *([c.input_name] if c.kind != NUMERIC else [])}) for c in columns
  )


def _short_list(names: Sequence[str], limit: int = 12) -> str:
  shown = ", ".join(repr(n) for n in names[:limit])
  return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def label_dtype(schema, label_key: str) -> str:
  """STORED_INT64, STORED_FLOAT32 or STORED_STRING (core.column_types): how the label is stored."""
  for f in schema.feature:
    if f.name == label_key:
      schema_type = _schema_type(f)
      if schema_type is None:
        raise ContractError(f"label {label_key!r} has no values in the data; check --label-key.")
      return SCHEMA_TO_STORED[schema_type]
  raise ContractError(f"label {label_key!r} is not a column of the data; check --label-key.")


def schema_types(schema) -> dict[str, str]:
  """Column -> its core.column_types.SCHEMA_TYPES type, as a tensorflow_metadata Schema types it
  (features of other types, STRUCT or none, are left out)."""
  return {f.name: t for f in schema.feature if (t := _schema_type(f)) is not None}


def _schema_type(feature) -> str | None:
  """A schema feature's type by its FeatureType name, None unless one of SCHEMA_TYPES."""
  from tensorflow_metadata.proto.v0 import schema_pb2

  name = schema_pb2.FeatureType.Name(feature.type)
  return name if name in SCHEMA_TYPES else None


def _tf_dtype(dtype: str):
  import tensorflow as tf

  return {
    STORED_INT64: tf.int64,
    STORED_FLOAT32: tf.float32,
    STORED_STRING: tf.string,
  }[dtype]


def parse_columns(serialized, columns: Sequence[Column]) -> dict[str, Any]:
  """Parses serialized tf.Examples into the model's inputs.

  Numbers become one float32 [batch, n] tensor, NUMERIC_INPUT, in `numeric_columns` order,
  with NaN where a value is missing (absent, or an empty list as the stock CsvExampleGen
  writes an empty cell); each text column becomes a tf.string [batch, 1] tensor with '' where
  missing. Only the first value of a multi-valued feature is kept.

  Args:
    serialized: a [batch] tf.string tensor of serialized tf.Examples.
    columns: the model's columns.

  Returns:
    Input name -> tensor.
  """
  import tensorflow as tf

  if not columns:  # tf.io.parse_example refuses an empty spec.
    return {}
  spec = {c.name: tf.io.RaggedFeature(_tf_dtype(c.dtype)) for c in columns}
  parsed = tf.io.parse_example(serialized, spec)
  out = {}
  numbers = []
  for c in columns:
    ragged = parsed[c.name]
    if c.dtype == STORED_STRING:
      out[c.input_name] = ragged.to_tensor(default_value="", shape=[None, 1])
    else:
      values = tf.cast(ragged, tf.float32) if c.dtype == STORED_INT64 else ragged
      numbers.append(values.to_tensor(default_value=float("nan"), shape=[None, 1]))
  if numbers:
    out[NUMERIC_INPUT] = numbers[0] if len(numbers) == 1 else tf.concat(numbers, axis=1)
  return out


def examples_signature(model, columns: Sequence[Column]):
  """A concrete function: `examples` (serialized tf.Examples) -> {"outputs": model output}."""
  import tensorflow as tf

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=SERVING_INPUT)])
  def serve(examples):
    return {SERVING_OUTPUT: model(parse_columns(examples, columns), training=False)}

  return serve.get_concrete_function()


def rows_signature(model, columns: Sequence[Column]):
  """A concrete function taking one named [batch] value per column -> {"outputs": ...}.

  A float for every number whatever the CSV stored it as (NaN when missing), a string for
  text ('' when missing), each named `rows_key(column)`. TF Serving's REST API calls it with
  `{"signature_name": "rows", "instances": [{"<column>": value, ...}]}`.
  """
  import tensorflow as tf

  numeric = numeric_columns(columns)
  text = [c for c in columns if c.kind != NUMERIC]
  spec = [tf.TensorSpec([None], tf.float32, name=rows_key(c.name)) for c in numeric]
  spec += [tf.TensorSpec([None], tf.string, name=rows_key(c.name)) for c in text]

  @tf.function(input_signature=spec)
  def rows(*values):
    features = {}
    if numeric:
      features[NUMERIC_INPUT] = tf.stack(list(values[: len(numeric)]), axis=1)
    for c, value in zip(text, values[len(numeric) :], strict=True):
      features[c.input_name] = tf.reshape(value, [-1, 1])
    return {SERVING_OUTPUT: model(features, training=False)}

  return rows.get_concrete_function()


def model_inputs_signature(model, output_name: str = SERVING_OUTPUT):
  """A concrete function taking the Keras model's inputs by name -> {output_name: output}."""
  import tensorflow as tf

  specs = {
    t.name.split(":")[0]: tf.TensorSpec(t.shape, t.dtype, name=t.name.split(":")[0])
    for t in model.inputs
  }
  call = tf.function(lambda inputs: {output_name: model(inputs, training=False)})
  return call.get_concrete_function(specs)


def contract_columns(contract: ModelContract) -> list[Column]:
  """The raw columns a contract's model takes, in input order."""
  return [Column(c["column"], c["stored_as"]) for i in contract.inputs for c in i["columns"]]


def parse_label(serialized, label_key: str, dtype: str):
  """Parses the label column into a [batch] tensor (0, NaN or '' where it is missing)."""
  import tensorflow as tf

  parsed = tf.io.parse_example(serialized, {label_key: tf.io.RaggedFeature(_tf_dtype(dtype))})
  ragged = parsed[label_key]
  default = {STORED_STRING: "", STORED_INT64: 0}.get(dtype, float("nan"))
  return ragged.to_tensor(default_value=default, shape=[None, 1])[:, 0]


def label_target(label, info: tasks.LabelInfo, dtype: str):
  """Maps raw labels to what a contract's model is trained against (class i is classes[i]).

  Class labels become class indices (int64 for multiclass, float32 0/1 for binary), -1 for a
  value outside the class vocabulary; regression labels become float32.
  """
  import tensorflow as tf

  if info.task == tasks.REGRESSION:
    return tf.cast(label, tf.float32)
  classes = tf.constant(list(info.classes), dtype=_tf_dtype(dtype))
  hit = tf.equal(tf.expand_dims(label, 1), tf.expand_dims(classes, 0))
  index = tf.where(
    tf.reduce_any(hit, axis=1), tf.argmax(tf.cast(hit, tf.int32), axis=1), tf.constant(-1, tf.int64)
  )
  if info.task == tasks.BINARY:
    return tf.cast(index, tf.float32)
  return index


# ----------------------------------------------------------------------------- contract file


@dataclasses.dataclass(frozen=True)
class ModelContract:
  """What a model takes and returns, written beside its SavedModel (the default model writes one).

  Attributes:
    task: 'binary', 'multiclass' or 'regression'.
    label: {"key", "task", "classes"}; class index i stands for classes[i].
    inputs: one dict per model input: name, dtype ('float32' or 'string'), shape, columns
      (the columns it holds, in order), and per column its kind, how it is stored, whether it
      may be missing, the missing value, and for text columns the vocabulary size.
    output: what the `outputs` tensor means.
    preprocessing_included: whether the model takes raw columns (its own preprocessing).
  """

  task: str
  label: dict
  inputs: list[dict]
  output: str
  preprocessing_included: bool = True

  def to_json(self) -> dict:
    return {"format": CONTRACT_FORMAT, **dataclasses.asdict(self)}

  @classmethod
  def from_json(cls, data: dict) -> ModelContract:
    fields = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in fields})


def output_meaning(task: str, classes: Sequence) -> str:
  """One sentence saying what the model's output tensor holds."""
  if task == "multiclass":
    return f"probabilities [batch, {len(classes)}] over label.classes, in that order"
  if task == "binary":
    return f"probability [batch, 1] that the label is {classes[-1]!r} (label.classes[1])"
  return "predicted value [batch, 1] of the label"


def write_contract(saved_model_dir: str, contract: ModelContract) -> str:
  """Writes contract.json into a SavedModel folder and returns its path."""
  import tensorflow as tf

  path = os.path.join(saved_model_dir, CONTRACT_FILE)
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(json.dumps(contract.to_json(), indent=2, sort_keys=True))
  return path


def read_contract(saved_model_dir: str) -> ModelContract | None:
  """The contract of a SavedModel folder, or None for a model that has none (stock modules)."""
  import tensorflow as tf

  path = os.path.join(saved_model_dir, CONTRACT_FILE)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return ModelContract.from_json(json.loads(f.read()))


def import_trainer_module(module: str) -> None:
  """Imports the trainer module a model was built by, the way the trainer loaded it.

  Readers that load the Keras model call this first: a module registers its custom Keras layers
  when it is imported (the default model's do), and `load_model` rebuilds them only then.

  Args:
    module: the Model's trainer_module property (DistributedTrainer): a module path, a packaged
      module (`name@wheel`, installed for the import as the trainer installs it) or a module
      file; '' (a Model of another trainer) imports nothing.
  """
  if not module:
    return
  from tfx.utils import import_utils

  # TFX's loaders hand back one attribute of the module; every module has __name__.
  from_file = module.endswith(".py")
  load = import_utils.import_func_from_source if from_file else import_utils.import_func_from_module
  try:
    load(module, "__name__")
  except ImportError as e:
    # A model whose layers are all Keras' own loads without it.
    logging.getLogger(__name__).warning("Trainer module %s not imported: %s", module, e)
