"""An executor that fails the way a user's mistake fails a step (for the entrypoint's tests)."""

from tfx.dsl.components.base import base_executor

from core.errors import UserInputError

MESSAGE = "the Kubeflow Training Operator is not installed; check kubectl get crd tfjobs."


class Executor(base_executor.BaseExecutor):
  def Do(self, input_dict, output_dict, exec_properties):
    del input_dict, output_dict, exec_properties
    raise UserInputError(MESSAGE)


class BuggyExecutor(base_executor.BaseExecutor):
  def Do(self, input_dict, output_dict, exec_properties):
    del input_dict, output_dict, exec_properties
    raise KeyError("a bug of ours")
