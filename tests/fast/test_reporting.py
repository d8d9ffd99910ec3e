"""The runners' one-line error messages (pipeline/cli/reporting.py)."""

from core.errors import UserCodeError, UserInputError
from pipeline.cli import reporting

WHEEL = "/o/pipeline_root/_wheels/tfx_user_code_DistributedTrainer-0.0+5e1f-py3-none-any.whl"


def _raised_in_a_component(error: BaseException) -> BaseException:
  """`error` as the LocalDagRunner re-raises it: the context of another exception."""
  try:
    try:
      raise error
    except Exception as inner:
      raise RuntimeError("component DistributedTrainer failed") from inner
  except RuntimeError as outer:
    return outer


def test_a_packaged_module_is_named_by_the_users_file():
  cause = AttributeError("'LambdaCallback' object has no attribute 'x'")
  failure = _raised_in_a_component(UserCodeError(f"taxi_utils@{WHEEL}", "run_fn", cause))
  files = ["/data/modules/taxi_utils.py", None]
  message = reporting.user_error_message(failure, "/o", files)
  assert message.startswith("run_fn in /data/modules/taxi_utils.py raised AttributeError: ")
  # Without the runner's files, the module's own file name still beats the wheel's path.
  assert reporting.user_error_message(failure).startswith("run_fn in taxi_utils.py raised")


def test_user_input_errors_keep_their_line_and_bugs_get_none():
  failure = _raised_in_a_component(UserInputError("label 'y' is missing; pass --label-key."))
  assert reporting.user_error_message(failure) == "label 'y' is missing; pass --label-key."
  assert reporting.user_error_message(_raised_in_a_component(KeyError("ours"))) is None
