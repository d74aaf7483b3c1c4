"""Reference cases from peer implementations (ONNX, ...), independent of ``rnngraph``."""
