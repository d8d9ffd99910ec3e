"""Column types as a tensorflow_metadata Schema names them: INT, FLOAT and BYTES.

`model_contract.schema_types` reads them from a schema, the data gate compares and prints them,
and `model_scoring.conform_lib` converts tonight's examples between them. Plain Python.
"""

INT = "INT"
FLOAT = "FLOAT"
BYTES = "BYTES"
