"""The optional packages behind ``lightmod.onnx``: imported on first use, never by ``import lightmod``."""
from ..base import MXNetError

__all__ = ["require_onnx", "require_onnxruntime"]

_HINT = 'install them with: pip install "lightmod[onnx]" (the onnx extra: onnx and onnxruntime)'


def require_onnx():
    """The ``onnx`` module, or an MXNetError that names the extra to install."""
    try:
        import onnx
    except ImportError as err:
        raise MXNetError("ONNX support needs the 'onnx' package, which is not installed (%s); %s"
                         % (err, _HINT)) from None
    return onnx


def require_onnxruntime():
    """The ``onnxruntime`` module, or an MXNetError that names the extra to install."""
    try:
        import onnxruntime
    except ImportError as err:
        raise MXNetError("Running ONNX models needs the 'onnxruntime' package, which is not "
                         "installed (%s); %s" % (err, _HINT)) from None
    return onnxruntime
