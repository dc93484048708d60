"""``mx.optimizer``: MXNet 1.9.1's optimizers, their registry and the Updater.

``mx.optimizer.SGD(...)``, ``mx.optimizer.create('adam', ...)``, ``@mx.optimizer.register``,
``mx.optimizer.get_updater(opt)``; the rules are in ``optimizer.py``, the Updater in
``updater.py``.
"""
from . import optimizer
from .optimizer import *  # noqa: F401,F403
from .optimizer import SGD, Optimizer, create, register  # noqa: F401
from .updater import Updater, get_updater

# MXNet defines the Updater in mxnet.optimizer.optimizer; code that reaches it there keeps working
optimizer.Updater = Updater
optimizer.get_updater = get_updater

__all__ = optimizer.__all__ + ["Updater", "get_updater"]
