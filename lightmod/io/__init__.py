"""Data iterators (``mx.io``): DataDesc, DataBatch, DataIter, NDArrayIter, ResizeIter,
PrefetchingIter, CSVIter, ImageRecordIter, LibSVMIter, MNISTIter."""
from . import io
from .io import (DataDesc, DataBatch, DataIter, ResizeIter, PrefetchingIter, NDArrayIter,
                 CSVIter)
from .image_record import ImageRecordIter, ImageRecordUInt8Iter, ImageRecordInt8Iter
from .libsvm import LibSVMIter
from . import utils
from .mnist import MNISTIter

__all__ = io.__all__ + ["ImageRecordIter", "ImageRecordUInt8Iter", "ImageRecordInt8Iter",
                        "LibSVMIter", "MNISTIter"]
