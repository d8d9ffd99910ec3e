"""ComponentSpec of the DistributedTrainer: the stock TrainerSpec plus its own keys
(`constants`)."""

from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ExecutionParameter

from components.distributed_trainer import constants


class DistributedTrainerSpec(standard_component_specs.TrainerSpec):
  """TrainerSpec plus strategy, local-cluster and training-loop parameters."""

  PARAMETERS = {
    **standard_component_specs.TrainerSpec.PARAMETERS,
    constants.STRATEGY_KEY: ExecutionParameter(type=str),
    constants.LOCAL_WORKERS_KEY: ExecutionParameter(type=int),
    constants.LOCAL_PS_KEY: ExecutionParameter(type=int),
    constants.GLOBAL_BATCH_SIZE_KEY: ExecutionParameter(type=int),
    constants.NUM_EPOCHS_KEY: ExecutionParameter(type=int),
    constants.STEPS_PER_EXECUTION_KEY: ExecutionParameter(type=int),
    constants.MIXED_PRECISION_KEY: ExecutionParameter(type=str, optional=True),
    constants.WORKER_TIMEOUT_KEY: ExecutionParameter(type=int),
    constants.MAX_RESTARTS_KEY: ExecutionParameter(type=int),
    constants.TFJOB_KEY: ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
    **standard_component_specs.TrainerSpec.INPUTS,
    constants.ANOMALIES_KEY: ChannelParameter(
      type=standard_artifacts.ExampleAnomalies, optional=True
    ),
  }
  OUTPUTS = dict(standard_component_specs.TrainerSpec.OUTPUTS)
