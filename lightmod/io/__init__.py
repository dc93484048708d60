"""Data iterators (``mx.io``): DataDesc, DataBatch, DataIter, NDArrayIter, ResizeIter,
PrefetchingIter, CSVIter, MNISTIter."""
from . import io
from .io import (DataDesc, DataBatch, DataIter, ResizeIter, PrefetchingIter, NDArrayIter,
                 CSVIter)
from . import utils
from .mnist import MNISTIter

__all__ = io.__all__ + ["MNISTIter"]
