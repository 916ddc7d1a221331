"""Import models (ONNX files, PyTorch modules) as layer tables."""
