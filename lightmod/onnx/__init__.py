"""``mx.onnx``: export lightmod (and MXNet 1.x) models to ONNX, and read ONNX models back.

``export_model`` follows MXNet 1.9.1's ``mx.onnx.export_model``; ``import_model`` and
``get_model_metadata`` follow ``mx.contrib.onnx``. They need the ``onnx`` extra
(``pip install "lightmod[onnx]"``: onnx and onnxruntime), which is imported on first use only.
The translations are keyed by the operator registry (see ``lightmod/onnx/_table.py``); the
covered operators and attributes are listed in docs/onnx.md.
"""
from ._export import export_model
from ._import import get_model_metadata, import_model
from ._table import supported_operators

__all__ = ["export_model", "import_model", "get_model_metadata", "get_operator_support"]


def get_operator_support(opset_version=None):
    """Names of the lightmod operators the exporter translates (the same for opsets 12 and 13)."""
    return supported_operators()
