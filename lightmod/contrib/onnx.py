"""``mx.contrib.onnx``: MXNet 1.9.1's older home of the ONNX functions (the same functions as
``mx.onnx``, plus the importer)."""
from ..onnx import export_model, get_model_metadata, import_model

__all__ = ["export_model", "import_model", "get_model_metadata"]
