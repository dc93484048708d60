"""Data iterators (``mx.io``): DataDesc, DataBatch, DataIter, NDArrayIter, ResizeIter,
PrefetchingIter, CSVIter, ImageRecordIter, LibSVMIter."""
from . import io, utils
from .image_record import ImageRecordInt8Iter, ImageRecordIter, ImageRecordUInt8Iter
from .io import CSVIter, DataBatch, DataDesc, DataIter, NDArrayIter, PrefetchingIter, ResizeIter

__all__ = io.__all__ + ["ImageRecordIter", "ImageRecordUInt8Iter", "ImageRecordInt8Iter"]
