"""Data iterators (``mx.io``): DataDesc, DataBatch, DataIter, NDArrayIter, ResizeIter,
PrefetchingIter, CSVIter."""
from . import io
from .io import (DataDesc, DataBatch, DataIter, ResizeIter, PrefetchingIter, NDArrayIter,
                 CSVIter)
from . import utils

__all__ = io.__all__
