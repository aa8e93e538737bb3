"""Trained validators served by onnxruntime. Each registers a factory for its manifest task."""
