"""Optimizer component: pruned, quantized, ONNX and TensorRT variants of a trained model."""

from components.optimizer.component import Optimizer

__all__ = ["Optimizer"]
