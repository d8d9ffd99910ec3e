"""Custom TFX components of the pipeline kit.

tensorflow-model-optimization needs Keras 2, so every process that imports the
components uses tf_keras as tf.keras unless the caller already chose.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
