"""Image functions, augmenters and ``ImageIter`` (``mx.image`` / ``mx.img``); decoding needs
the ``image`` extra (OpenCV)."""
from . import image
from .image import *  # noqa: F401,F403

__all__ = image.__all__
