"""core.column_types: the three spellings of a column's type and the tables between them.

That its schema and statistics type names are tensorflow_metadata's is checked in
tests/unit/test_model_contract.py (this layer runs without it).
"""

import ast
import inspect

from core import column_types as ct


def test_the_values_are_the_ones_recorded_in_artifacts_and_contracts():
  # The Examples' column_types property, schemas and contract.json files spell them so.
  assert ct.CSV_KINDS == ("int", "float", "string", "unknown")
  assert ct.SCHEMA_TYPES == ("INT", "FLOAT", "BYTES")
  assert ct.STORED_TYPES == ("int64", "float32", "string")


def test_each_type_has_one_translation_in_every_vocabulary():
  chains = [
    (ct.CSV_TO_SCHEMA[kind], ct.SCHEMA_TO_STORED[ct.CSV_TO_SCHEMA[kind]])
    for kind in ct.CSV_KINDS
    if kind != ct.CSV_UNKNOWN
  ]
  assert chains == [("INT", "int64"), ("FLOAT", "float32"), ("BYTES", "string")]
  assert ct.CSV_UNKNOWN not in ct.CSV_TO_SCHEMA  # no values, so no schema type


def test_the_reverse_tables_undo_the_forward_ones():
  assert {ct.SCHEMA_TO_CSV[s]: s for s in ct.SCHEMA_TYPES} == ct.CSV_TO_SCHEMA
  assert {ct.STORED_TO_CSV[ct.SCHEMA_TO_STORED[s]] for s in ct.SCHEMA_TYPES} == set(
    ct.CSV_TO_SCHEMA
  )
  assert ct.STORED_TO_CSV == {"int64": "int", "float32": "float", "string": "string"}


def test_each_stored_type_has_its_tf_example_list():
  assert ct.STORED_TO_FEATURE_LIST == {
    "int64": "int64_list",
    "float32": "float_list",
    "string": "bytes_list",
  }


def test_the_module_is_plain_python():
  tree = ast.parse(inspect.getsource(ct))
  assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
