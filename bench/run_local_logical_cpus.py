"""`pipeline/run_local.py` with the CPU split into N logical devices (MirroredStrategy on CPUs).

Logical devices must be configured before TensorFlow's runtime starts, so this sets them up
and then runs the runner in the same process:

    .venv/bin/python bench/run_local_logical_cpus.py 2 --strategy mirrored [run_local flags]
"""

import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def main() -> int:
  count, argv = int(sys.argv[1]), sys.argv[2:]
  import tensorflow as tf

  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
  )
  from pipeline.cli import local as run_local

  return run_local.main(argv)


if __name__ == "__main__":
  sys.exit(main())
