"""The runners' one-line error messages (pipeline/cli/reporting.py)."""

import os

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


def _run_module(folder, main: str, helper: str):
  """Runs `main.py`'s `run()` from `folder` (which also holds `helper.py`); returns what it
  raised, as the LocalDagRunner re-raises it."""
  import importlib.util
  import sys

  (folder / "helper.py").write_text(helper)
  main_file = folder / "main.py"
  main_file.write_text(main)
  sys.path.insert(0, str(folder))
  try:
    spec = importlib.util.spec_from_file_location("main", main_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
      module.run()
    except Exception as e:
      return _raised_in_a_component(e)
  finally:
    sys.path.remove(str(folder))
    sys.modules.pop("helper", None)
  raise AssertionError("run() raised nothing")


def test_an_error_in_a_file_beside_the_module_file_is_the_users(tmp_path):
  # TFX's penguin_utils_keras.py takes preprocessing_fn from penguin_utils_base.py beside it.
  failure = _run_module(
    tmp_path,
    "import helper\n\ndef run():\n  return helper.preprocessing_fn({})\n",
    "def preprocessing_fn(inputs):\n  return inputs['culmen_length_mm']\n",
  )
  error = reporting.user_code_error(failure, [str(tmp_path / "main.py"), None])
  assert str(error).startswith(
    f"preprocessing_fn in {tmp_path / 'helper.py'} raised KeyError: 'culmen_length_mm'; "
  )
  # Elsewhere, the error is not the user's: a bug of ours keeps its traceback.
  assert reporting.user_code_error(failure, [str(tmp_path / "other" / "module.py")]) is None


def test_the_module_files_own_frame_wins_over_a_deeper_library_frame(tmp_path):
  failure = _run_module(
    tmp_path,
    "import json\n\ndef run():\n  return json.loads('{')\n",
    "",
  )
  error = reporting.user_code_error(failure, ["/elsewhere/packaged/main.py"])
  assert error.module == "/elsewhere/packaged/main.py" and error.function == "run"


def test_the_kits_own_files_are_never_the_users_even_beside_a_module_file():
  from core import errors

  try:
    reporting.user_error_message(object())  # a bug of ours, raised in core/errors.py
  except AttributeError as e:
    failure = _raised_in_a_component(e)
  # A module file kept in the kit's own folder does not make the kit's frames the user's.
  beside = os.path.join(os.path.dirname(errors.__file__), "module.py")
  assert reporting.user_code_error(failure, [beside]) is None
