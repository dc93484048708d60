"""``mx.optimizer``: MXNet 1.9.1's optimizers, their registry and the Updater.

``mx.optimizer.SGD(...)``, ``mx.optimizer.create('adam', ...)``, ``@mx.optimizer.register``,
``mx.optimizer.get_updater(opt)``; see ``optimizer.py``.
"""
from . import optimizer
from .optimizer import *  # noqa: F401,F403
from .optimizer import (Optimizer, Updater, SGD, create, register, get_updater)  # noqa: F401

__all__ = optimizer.__all__
