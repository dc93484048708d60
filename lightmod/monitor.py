"""Monitor: statistics of every intermediate array, every ``interval`` batches (``mx.mon``).

Install it on executors (``Module.install_monitor(mon)`` installs it on every device's
executor). Between ``tic()`` and ``toc()`` of an active step the executors report each op
output of the forward pass and of the backward pass (``<node>_output``,
``<node>_backward_output<i>``; with ``monitor_all`` also op inputs); ``toc()`` adds the
arguments and auxiliary states and returns ``[(step, name, text)]``.
"""
import logging
import re
from math import sqrt

from . import ndarray
from .ndarray import NDArray

__all__ = ["Monitor"]


def _default_stat(x):
    """Root mean square of the array: ``norm(x) / sqrt(x.size)``."""
    return ndarray.norm(x) / sqrt(x.size)


class Monitor:
    """Collect ``stat_func(array)`` for arrays whose names match ``pattern``.

    Parameters
    ----------
    interval : int
        Collect on every ``interval``-th call of ``tic()`` (the first call included).
    stat_func : callable NDArray -> NDArray or list of NDArray
        The statistic; default: root mean square.
    pattern : str
        Regular expression matched (``re.match``) against array names.
    sort : bool
        Sort the result of ``toc()`` by name.
    monitor_all : bool
        Also report the inputs of every op, not only its outputs.
    """

    def __init__(self, interval, stat_func=None, pattern='.*', sort=False, monitor_all=False):
        self.interval = interval
        self.stat_func = _default_stat if stat_func is None else stat_func
        self.re_prog = re.compile(pattern)
        self.sort = sort
        self.monitor_all = monitor_all
        self.exes = []
        # the current step: its number, whether it collects, and what it collected so far
        self.step = 0
        self.activated = False
        self.queue = []

    def stat_helper(self, name, array):
        """The executors' callback: record ``stat_func(array)`` while a step collects."""
        if not self.activated:
            return
        if isinstance(name, bytes):
            name = name.decode("utf-8")
        self._record(name, array)

    def _record(self, name, array):
        if self.re_prog.match(name):
            self.queue.append((self.step, name, self.stat_func(array)))

    def install(self, exe):
        """Start reporting from executor ``exe``."""
        exe.set_monitor_callback(self.stat_helper, self.monitor_all)
        self.exes.append(exe)

    def tic(self):
        """Start a step; collection is active on every ``interval``-th step."""
        if self.step % self.interval == 0:
            self.activated = True
            self.queue = []
        self.step += 1

    def toc(self):
        """End the step: add arguments and aux states, return ``[(step, name, text)]``.

        ``text`` is the statistic formatted as MXNet does: ``str(scalar)`` for shape-(1,)
        values, ``str(numpy array)`` otherwise, each followed by a tab.
        """
        if not self.activated:
            return []
        for exe in self.exes:
            for arrays in (exe.arg_dict, exe.aux_dict):
                for name, array in arrays.items():
                    self._record(name, array)
        self.activated = False
        collected, self.queue = self.queue, []
        if self.sort:
            collected.sort(key=lambda entry: entry[1])
        return [(step, name, _stat_text(name, stat)) for step, name, stat in collected]

    def toc_print(self):
        """End the step and log every collected statistic."""
        for step, name, text in self.toc():
            logging.info(f'Batch: {step:7d} {name:30s} {text:s}')


def _stat_text(name, stat):
    """A statistic (an NDArray or a list of them) as text: each value followed by a tab,
    a one-element value as its scalar, any other as the numpy array's ``str``."""
    values = [stat] if isinstance(stat, NDArray) else stat
    if not isinstance(values, list):
        raise TypeError("Monitor stat_func must return an NDArray or a list of "
                        "NDArrays, got %s for %r" % (type(stat).__name__, name))
    pieces = []
    for value in values:
        if not isinstance(value, NDArray):
            raise TypeError("Monitor stat_func must return NDArrays, got %s for %r"
                            % (type(value).__name__, name))
        pieces.append(str(value.asscalar() if value.shape == (1,) else value.asnumpy()))
    return "".join(piece + "\t" for piece in pieces)
