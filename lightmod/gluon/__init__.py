"""``mx.gluon``: only ``mx.gluon.utils`` (``split_data``, ``split_and_load``,
``clip_global_norm``), the helpers Module programs borrow from Gluon.

lightmod reimplements MXNet's Module API, not Gluon: any other Gluon name (``gluon.nn``,
``gluon.Trainer``, ``gluon.loss``...) raises an MXNetError that says so.
"""
from ..base import MXNetError
from . import utils

__all__ = ["utils"]


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(name)
    raise MXNetError("mx.gluon.%s is not supported: lightmod implements MXNet's Module API, and of "
                     "Gluon only mx.gluon.utils (split_data, split_and_load, clip_global_norm)" % name)
