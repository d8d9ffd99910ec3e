"""Column types, one vocabulary: the CSV kinds, the schema's types, the stored types, and tables.

A column has a type in three places, each spelt its own way:
  - the ExampleGen's CSV kind (CSV_KINDS): how stock CsvExampleGen types a CSV column, or what a
    given schema says; recorded in the Examples' `column_types` property, and what `core.tasks`
    decides a label's task from;
  - the schema's type (SCHEMA_TYPES): tensorflow_metadata's FeatureType names, as TFDV's schema
    types a column; the data gate compares them and `model_scoring.conform_lib` converts to them;
  - the stored type (STORED_TYPES): how the tf.Examples store a value, the model contract's
    `stored_as` and `model_contract.Column.dtype`.

The tables below are the only translations between them; modules that read TFMD protos look the
protos' type names up here. Plain Python.
"""

# The ExampleGen's CSV kinds; a column empty in every row is CSV_UNKNOWN.
CSV_INT = "int"
CSV_FLOAT = "float"
CSV_STRING = "string"
CSV_UNKNOWN = "unknown"
CSV_KINDS = (CSV_INT, CSV_FLOAT, CSV_STRING, CSV_UNKNOWN)

# The schema's column types (tensorflow_metadata's FeatureType names).
SCHEMA_INT = "INT"
SCHEMA_FLOAT = "FLOAT"
SCHEMA_BYTES = "BYTES"
SCHEMA_TYPES = (SCHEMA_INT, SCHEMA_FLOAT, SCHEMA_BYTES)

# The column types as the tf.Examples store the values (the model contract's `stored_as`).
STORED_INT64 = "int64"
STORED_FLOAT32 = "float32"
STORED_STRING = "string"
STORED_TYPES = (STORED_INT64, STORED_FLOAT32, STORED_STRING)

# The schema type of a CSV kind's column, and back (a schema given to the ExampleGen). An
# UNKNOWN column holds no value, so it has no schema type.
CSV_TO_SCHEMA = {CSV_INT: SCHEMA_INT, CSV_FLOAT: SCHEMA_FLOAT, CSV_STRING: SCHEMA_BYTES}
SCHEMA_TO_CSV = {schema_type: kind for kind, schema_type in CSV_TO_SCHEMA.items()}

# How the tf.Examples store a column of each schema type.
SCHEMA_TO_STORED = {
  SCHEMA_INT: STORED_INT64,
  SCHEMA_FLOAT: STORED_FLOAT32,
  SCHEMA_BYTES: STORED_STRING,
}

# The CSV kind of a stored column (a label's kind, for `core.tasks`).
STORED_TO_CSV = {
  stored: SCHEMA_TO_CSV[schema_type] for schema_type, stored in SCHEMA_TO_STORED.items()
}

# The tf.train.Feature list (its `kind` oneof) a stored type's values are in.
STORED_TO_FEATURE_LIST = {
  STORED_INT64: "int64_list",
  STORED_FLOAT32: "float_list",
  STORED_STRING: "bytes_list",
}

# TFDV statistics' type names (FeatureNameStatistics.Type) -> the schema's types: TFDV gives a
# BYTES feature that holds UTF-8 text STRING statistics.
STATS_TO_SCHEMA = {
  "INT": SCHEMA_INT,
  "FLOAT": SCHEMA_FLOAT,
  "STRING": SCHEMA_BYTES,
  "BYTES": SCHEMA_BYTES,
}
