"""Data iterators (``mx.io``): DataDesc, DataBatch, DataIter, NDArrayIter, ResizeIter,
PrefetchingIter, CSVIter, ImageRecordIter, LibSVMIter."""
from . import io
from .io import (DataDesc, DataBatch, DataIter, ResizeIter, PrefetchingIter, NDArrayIter,
                 CSVIter)
from .image_record import ImageRecordIter, ImageRecordUInt8Iter, ImageRecordInt8Iter
from .libsvm import LibSVMIter
from . import utils

__all__ = io.__all__ + ["ImageRecordIter", "ImageRecordUInt8Iter", "ImageRecordInt8Iter",
                        "LibSVMIter"]
