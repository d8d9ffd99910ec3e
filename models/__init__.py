"""Models that ship with the kit; the trainer loads them by module path, as it loads a user's."""

# Sets TF_USE_LEGACY_KERAS before TensorFlow loads, so the models' layers are tf_keras layers.
import components  # noqa: F401
