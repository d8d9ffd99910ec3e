"""Spec of the fast CSV ExampleGen: the stock FileBasedExampleGen spec plus CSV options."""

from tfx.types import standard_component_specs
from tfx.types.component_spec import ExecutionParameter

LABEL_KEY_KEY = "label_key"
MAX_BAD_ROW_FRACTION_KEY = "max_bad_row_fraction"
ALLOW_NON_FINITE_KEY = "allow_non_finite"
SCHEMA_PATH_KEY = "schema_path"
DELIMITER_KEY = "delimiter"
BLOCK_SIZE_KEY = "block_size"
ROLLING_SPANS_KEY = "rolling_spans"
KEEP_LABEL_TOKENS_KEY = "keep_label_tokens"
# JSON list of the columns whose bad cells are written empty (the model leaves them out).
LENIENT_COLUMNS_KEY = "lenient_columns"
UNRESOLVED_INPUT_CONFIG_KEY = "unresolved_input_config"


class CsvExampleGenSpec(standard_component_specs.FileBasedExampleGenSpec):
  """FileBasedExampleGenSpec with the options of the batched CSV path."""

  PARAMETERS = {
    **standard_component_specs.FileBasedExampleGenSpec.PARAMETERS,
    LABEL_KEY_KEY: ExecutionParameter(type=str, optional=True),
    MAX_BAD_ROW_FRACTION_KEY: ExecutionParameter(type=float, optional=True),
    ALLOW_NON_FINITE_KEY: ExecutionParameter(type=int, optional=True),
    SCHEMA_PATH_KEY: ExecutionParameter(type=str, optional=True),
    DELIMITER_KEY: ExecutionParameter(type=str, optional=True),
    BLOCK_SIZE_KEY: ExecutionParameter(type=int, optional=True),
    ROLLING_SPANS_KEY: ExecutionParameter(type=int, optional=True),
    KEEP_LABEL_TOKENS_KEY: ExecutionParameter(type=int, optional=True),
    LENIENT_COLUMNS_KEY: ExecutionParameter(type=str, optional=True),
    UNRESOLVED_INPUT_CONFIG_KEY: ExecutionParameter(type=str, optional=True),
  }
