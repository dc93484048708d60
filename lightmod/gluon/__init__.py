"""``mx.gluon``: only what Module programs borrow from Gluon: ``mx.gluon.utils``
(``split_data``, ``split_and_load``, ``clip_global_norm``) and ``mx.gluon.loss`` (the loss
functions, on Symbols or NDArrays).

lightmod reimplements MXNet's Module API, not Gluon: any other Gluon name (``gluon.nn``,
``gluon.Trainer``...) raises an MXNetError that says so.
"""
from ..base import MXNetError
from . import loss, utils

__all__ = ["loss", "utils"]


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(name)
    raise MXNetError("mx.gluon.%s is not supported: lightmod implements MXNet's Module API, and of "
                     "Gluon only mx.gluon.utils and mx.gluon.loss" % name)
