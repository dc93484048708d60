"""Training callbacks (``mx.callback``), MXNet 1.9.1 behaviour.

Batch-end callbacks receive ``BatchEndParam(epoch, nbatch, eval_metric, locals)`` from
``lightmod.model``; epoch-end callbacks are called as ``cb(epoch, symbol, arg_params,
aux_params)``.
"""
import logging
import math
import time

__all__ = ["module_checkpoint", "do_checkpoint", "log_train_metric", "Speedometer",
           "ProgressBar", "LogValidationMetricsCallback"]


def module_checkpoint(mod, prefix, period=1, save_optimizer_states=False):
    """Epoch-end callback: ``mod.save_checkpoint(prefix, epoch + 1, save_optimizer_states)``
    every ``period`` epochs."""
    period = int(max(1, period))

    def _callback(iter_no, sym=None, arg=None, aux=None):
        if (iter_no + 1) % period == 0:
            mod.save_checkpoint(prefix, iter_no + 1, save_optimizer_states)
    return _callback


def do_checkpoint(prefix, period=1):
    """Epoch-end callback: ``mx.model.save_checkpoint(prefix, epoch + 1, sym, arg, aux)`` every
    ``period`` epochs (files ``prefix-symbol.json`` and ``prefix-%04d.params``)."""
    period = int(max(1, period))

    def _callback(iter_no, sym, arg, aux):
        if (iter_no + 1) % period == 0:
            from .model import save_checkpoint  # model imports the module stack: load lazily
            save_checkpoint(prefix, iter_no + 1, sym, arg, aux)
    return _callback


def log_train_metric(period, auto_reset=False):
    """Batch-end callback: log the metric every ``period`` batches (and optionally reset its
    local values)."""
    def _callback(param):
        if param.nbatch % period == 0 and param.eval_metric is not None:
            for name, value in param.eval_metric.get_name_value():
                logging.info("Iter[%d] Batch[%d] Train-%s=%f", param.epoch, param.nbatch, name,
                             value)
            if auto_reset:
                param.eval_metric.reset_local()
    return _callback


class Speedometer:
    """Batch-end callback logging samples/sec and the metric every ``frequent`` batches.

    The first call of an epoch only starts the clock. With ``auto_reset`` the metric's local
    values are reset after each report, so each line covers the last ``frequent`` batches
    (``Batch [a-b]``); without it the values are cumulative (``Batch [0-b]``).
    """

    def __init__(self, batch_size, frequent=50, auto_reset=True):
        self.batch_size = batch_size
        self.frequent = frequent
        self.auto_reset = auto_reset
        # the clock: ``init`` says whether it runs, ``tic`` is the time of the last report
        # (or of the epoch's first batch), ``last_count`` the batch number seen last
        self.init, self.tic, self.last_count = False, 0, 0

    def __call__(self, param):
        batch = param.nbatch
        if batch < self.last_count:
            # the batch number went back: a new epoch, so the clock starts again
            self.init = False
        self.last_count = batch
        if not self.init:
            self.init, self.tic = True, time.time()
            return
        if batch % self.frequent:
            return
        elapsed = time.time() - self.tic
        speed = self.frequent * self.batch_size / elapsed if elapsed else float("inf")
        logging.info(*self._report(param, batch, speed))
        self.tic = time.time()

    def _report(self, param, batch, speed):
        """The logging arguments of one report (resetting the metric's local values when
        ``auto_reset``)."""
        if param.eval_metric is None:
            return "Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec", param.epoch, batch, speed
        pairs = param.eval_metric.get_name_value()
        first = 0
        if self.auto_reset:
            param.eval_metric.reset_local()
            first = batch - self.frequent
        text = "Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec" + "\t%s=%f" * len(pairs)
        return (text, param.epoch, first, batch, speed) + tuple(v for pair in pairs for v in pair)


class ProgressBar:
    """Batch-end callback logging a text progress bar of ``length`` characters for an epoch of
    ``total`` batches."""

    def __init__(self, total, length=80):
        self.bar_len = length
        self.total = total

    def __call__(self, param):
        def share_of(scale):
            # scale first, then divide: the rounding below depends on this order
            return scale * param.nbatch / float(self.total)
        filled = int(round(share_of(self.bar_len)))
        bar = "=" * filled + "-" * (self.bar_len - filled)
        logging.info("[%s] %s%s\r", bar, math.ceil(share_of(100.0)), "%")


class LogValidationMetricsCallback:
    """Eval-end callback logging each validation metric as ``Epoch[%d] Validation-name=value``."""

    def __call__(self, param):
        if not param.eval_metric:
            return
        for name, value in param.eval_metric.get_name_value():
            logging.info("Epoch[%d] Validation-%s=%f", param.epoch, name, value)


# Callbacks users expect beyond MXNet's own (tqdm progress bar, History, EarlyStopping, ...).
from .fit_callbacks import (  # noqa: E402
    CSVLogger,
    EarlyStopping,
    History,
    ReduceLROnPlateau,
    StopTraining,
    TqdmProgressBar,
    plot_history,
)

__all__ += ["StopTraining", "TqdmProgressBar", "History", "EarlyStopping", "ReduceLROnPlateau",
            "CSVLogger", "plot_history"]
