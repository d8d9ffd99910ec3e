"""The kit's shared core: the names, vocabularies and decisions that more than one component,
the command line and the default model use.

Plain Python: nothing here imports TensorFlow, Beam or TFX, so runners and checks can read it
before anything heavy loads, and its tests run in the fast layer. Components never import one
another; what two of them share lives here (or, where it needs TensorFlow, in a shared module
directly under `components/`).
"""
