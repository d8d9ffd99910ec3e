"""core.errors: the one error contract, and the walk of an exception's cause/context chain."""

import pytest

from core import errors


def _raised(error: BaseException, cause=None, context=None) -> BaseException:
  """`error` as raised: from `cause`, and while handling `context`."""
  try:
    if context is None:
      raise error from cause
    try:
      raise context
    except BaseException:
      if cause is None:
        raise error  # noqa: B904 (the context is the point)
      raise error from cause
  except BaseException as raised:
    return raised


def test_a_user_input_error_is_a_value_error_and_a_user_code_error_a_runtime_error():
  assert issubclass(errors.UserInputError, ValueError)
  assert issubclass(errors.UserCodeError, RuntimeError)
  assert not issubclass(errors.UserCodeError, errors.UserInputError)


def test_a_user_code_error_names_the_function_the_module_and_the_first_line_of_the_cause():
  cause = KeyError("amount")
  error = errors.UserCodeError("/home/me/module.py", "run_fn", cause)
  assert (error.module, error.function) == ("/home/me/module.py", "run_fn")
  assert str(error) == (
    "run_fn in /home/me/module.py raised KeyError: 'amount'; the traceback above points into "
    "that function."
  )


def test_a_user_code_error_takes_only_the_first_line_and_says_when_there_is_none():
  many = ValueError("  first line\nsecond line\n")
  assert "raised ValueError: first line; " in str(errors.UserCodeError("m", "f", many))
  assert "raised ValueError: (no message); " in str(errors.UserCodeError("m", "f", ValueError()))


# TensorFlow 2.16's messages, as str() gives them, for a string that is not a number: raised
# in a tf.function (the stack of the node first), and from a tf.data iterator.
_GRAPH_ERROR = (
  "Graph execution error:\n\nDetected at node StringToNumber defined at (most recent call "
  'last):\n  File "/tmp/m.py", line 6, in <module>\n\n  File "/tmp/m.py", line 4, in f\n\n'
  "StringToNumberOp could not correctly convert string: abc\n\t [[{{node StringToNumber}}]] "
  "[Op:__inference_f_8]"
)
_ITERATOR_ERROR = (
  "{{function_node __wrapped__IteratorGetNext_output_types_1_device_/job:localhost/replica:0/"
  "task:0/device:CPU:0}} StringToNumberOp could not correctly convert string: x\n\t "
  "[[{{node StringToNumber}}]] [Op:IteratorGetNext] name: "
)
_EAGER_ERROR = (
  "{{function_node __wrapped__StringToNumber_device_/job:localhost/replica:0/task:0/device:CPU:0}}"
  " StringToNumberOp could not correctly convert string: q [Op:StringToNumber] name: "
)


def test_a_tensorflow_errors_line_is_its_message_not_the_graph_execution_header():
  says = "StringToNumberOp could not correctly convert string: "
  assert errors.first_line(RuntimeError(_GRAPH_ERROR)) == says + "abc"
  assert errors.first_line(RuntimeError(_ITERATOR_ERROR)) == says + "x"
  assert errors.first_line(RuntimeError(_EAGER_ERROR)) == says + "q"
  error = errors.UserCodeError("m.py", "run_fn", RuntimeError(_GRAPH_ERROR))
  assert f"raised RuntimeError: {says}abc; the traceback" in str(error)
  # A header with nothing after its stack keeps the header rather than saying nothing.
  assert errors.first_line(RuntimeError("Graph execution error:\n")) == "Graph execution error:"
  # Other messages: their first line, as before.
  assert errors.first_line(ValueError("{not a node} x\ny")) == "{not a node} x"


def test_a_user_code_errors_note_comes_last():
  error = errors.UserCodeError("m.py", "tuner_fn", TypeError("x"), note="Keras Tuner needs y.")
  assert str(error).endswith("points into that function. Keras Tuner needs y.")


def test_the_chain_follows_causes_and_contexts_in_order():
  root = OSError("disk full")
  middle = _raised(errors.UserInputError("cannot write"), cause=root)
  top = _raised(RuntimeError("component failed"), context=middle)
  assert list(errors.chain(top)) == [top, middle, root]
  assert list(errors.chain(root)) == [root]


def test_an_explicit_cause_wins_over_the_context():
  handled, cause = KeyError("handled"), OSError("cause")
  top = _raised(RuntimeError("top"), cause=cause, context=handled)
  assert list(errors.chain(top)) == [top, cause]


def test_the_chain_visits_each_exception_once_even_in_a_loop():
  a, b = ValueError("a"), ValueError("b")
  a.__cause__, b.__cause__ = b, a
  assert list(errors.chain(a)) == [a, b]


def test_find_returns_the_first_of_a_kind_subclasses_included_or_none():
  label = errors.UserInputError("first")
  outer = _raised(RuntimeError("outer"), cause=_raised(errors.UserInputError("x"), cause=label))
  found = errors.find(outer, errors.UserInputError)
  assert found is outer.__cause__ and str(found) == "x"

  class LabelError(errors.UserInputError):
    pass

  assert errors.find(_raised(RuntimeError("r"), cause=LabelError("y")), ValueError).args == ("y",)
  assert errors.find(outer, KeyError) is None


@pytest.mark.parametrize("kind", [errors.UserInputError, errors.UserCodeError])
def test_an_error_is_found_in_itself(kind):
  error = kind("m", "f", ValueError()) if kind is errors.UserCodeError else kind("bad")
  assert errors.find(error, kind) is error
