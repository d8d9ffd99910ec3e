"""Tests of any kind that need no TensorFlow, Beam or TFX, to run while working (test-fast)."""
