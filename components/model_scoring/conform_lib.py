"""Tonight's examples as the live model was trained to read them: each column in its old type.

A live version parses serialized tf.Examples with the types of the schema it was trained on.
When a column's type changed since (a column that was empty in every row, typed as text, now
holds numbers; whole numbers now have decimals), tonight's examples no longer parse for it
("Data types don't match"), though the data is valid. The Evaluator and the data gate score
the live model on tonight's rows converted to its own types, column by column:

  whole numbers -> numbers     exact
  numbers -> whole numbers     rounded to the nearest (exact for whole values)
  numbers -> text              the number as text (17031081800, 12.5)
  text -> numbers              the text read as a number; a cell that is not one is empty

Columns the live model did not know are left as they are (parsing ignores them); a column it
knew that is gone tonight stays absent (an empty cell to the model). The new model is trained
on tonight's types and reads tonight's examples unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from core import column_types

# tf.train.Feature kinds, by the schema's column types.
_KIND = {
  schema_type: column_types.STORED_TO_FEATURE_LIST[stored]
  for schema_type, stored in column_types.SCHEMA_TO_STORED.items()
}


def changed_columns(
  tonight: Mapping[str, str], baseline: Mapping[str, str]
) -> dict[str, tuple[str, str]]:
  """Columns whose type differs: name -> (tonight's type, the baseline's), INT/FLOAT/BYTES."""
  return {
    name: (tonight[name], baseline[name])
    for name in sorted(set(tonight) & set(baseline))
    if tonight[name] != baseline[name]
  }


def conform_records(records: Iterable[bytes], baseline: Mapping[str, str]) -> list[bytes]:
  """Serialized tf.Examples with every feature stored the way `baseline` types it.

  Args:
    records: serialized tf.Examples.
    baseline: column -> INT, FLOAT or BYTES, as the live model's schema types it.

  Returns:
    The records, re-serialized where a feature's kind changed (the others as they were).
  """
  import tensorflow as tf

  out = []
  for record in records:
    example = tf.train.Example.FromString(record)
    changed = False
    for name, feature in example.features.feature.items():
      want = _KIND.get(baseline.get(name, ""))
      have = feature.WhichOneof("kind")
      if want is None or have is None or have == want:
        continue
      values = list(getattr(feature, have).value)
      feature.Clear()
      getattr(feature, want).value.extend(_convert(values, have, want))
      changed = True
    out.append(example.SerializeToString() if changed else record)
  return out


def _convert(values: Sequence, have: str, want: str) -> list:
  if want == "bytes_list":
    return [_number_text(v).encode() for v in values]
  numbers = [_number(v) for v in values] if have == "bytes_list" else [float(v) for v in values]
  numbers = [v for v in numbers if v is not None and math.isfinite(v)]
  if want == "int64_list":
    return [round(v) for v in numbers if abs(v) < 2**63]
  return numbers


def _number_text(value) -> str:
  if isinstance(value, int):
    return str(value)
  return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def _number(value: bytes) -> float | None:
  try:
    return float(value.decode("utf-8").strip())
  except (UnicodeDecodeError, ValueError):
    return None


class Conformer:
  """Gives a batch of serialized examples (a tf.string tensor) the baseline's column types.

  Attributes:
    columns: the columns whose type changed, name -> (tonight's type, the baseline's).
  """

  def __init__(self, columns: Mapping[str, tuple[str, str]], baseline: Mapping[str, str]):
    self.columns = dict(columns)
    self._baseline = dict(baseline)

  def __call__(self, batch):
    import tensorflow as tf

    return tf.constant(conform_records(batch.numpy().tolist(), self._baseline), dtype=tf.string)


def conformer(tonight: Mapping[str, str], baseline: Mapping[str, str] | None) -> Conformer | None:
  """The Conformer from tonight's column types to the baseline's; None when none changed (or
  the baseline's types are not known)."""
  changed = changed_columns(tonight, baseline or {})
  return Conformer(changed, baseline) if changed else None
