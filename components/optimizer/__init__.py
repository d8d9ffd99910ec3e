"""Optimizer component: pruned, quantized, ONNX and TensorRT variants of a trained model."""

from components.optimizer.artifacts import OptimizationReport, OptimizedModel
from components.optimizer.component import Optimizer

__all__ = ["OptimizationReport", "OptimizedModel", "Optimizer"]
