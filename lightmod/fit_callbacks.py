"""Callbacks users expect beyond MXNet's own (re-exported in ``mx.callback``).

``fit`` stays a short loop; everything here plugs into its three hooks. One object can serve
several hooks: ``fit`` calls a batch-end callback with a ``BatchEndParam``, an epoch-end callback
with ``(epoch, symbol, arg_params, aux_params)`` and an eval-end callback with the
``BatchEndParam`` that ``score`` builds. The two BatchEndParam calls are told apart by their
``locals``: ``fit``'s contain ``train_data``, ``score``'s do not.

To stop training early a callback raises :class:`StopTraining`; ``fit`` ends after the current
epoch's bookkeeping (parameters synced, epoch-end callbacks run) and returns normally.
"""
import csv
import logging
import math
import os
import sys
import time

__all__ = ["StopTraining", "TqdmProgressBar", "History", "EarlyStopping", "ReduceLROnPlateau",
           "CSVLogger", "plot_history", "is_rank0"]


class StopTraining(Exception):
    """Raised by a callback to end ``fit`` after the current epoch."""


def is_rank0(param=None):
    """True unless this process is a non-zero rank of a distributed kvstore."""
    loc = getattr(param, "locals", None) or {}
    mod = loc.get("self")
    kv = getattr(mod, "_kvstore", None)
    rank = getattr(kv, "rank", 0) if kv is not None else 0
    return rank == 0


def _is_train_param(param):
    loc = getattr(param, "locals", None) or {}
    return "train_data" in loc


def _name_values(metric, use_global=True):
    if metric is None:
        return []
    getter = metric.get_global_name_value if use_global and hasattr(
        metric, "get_global_name_value") else metric.get_name_value
    return list(getter())


class TqdmProgressBar:
    """A live progress bar over the batches of each epoch (batch-end callback).

    Uses tqdm when it is installed and the output is a terminal; otherwise falls back to MXNet's
    text ``ProgressBar`` behaviour (a ``[====....]`` line logged every ``frequent`` batches), or
    to nothing with ``fallback=False``. Only rank 0 of a distributed run draws. Each epoch's
    bar is named ``Epoch N`` as in fit's ``Epoch[N]`` log lines; with ``leave=True`` (the
    default) the finished bar stays on screen as a line that can be read afterwards.
    """

    def __init__(self, total=None, frequent=None, fallback=True, stream=None, force_tqdm=None,
                 leave=True):
        self.leave = leave
        self.total = total
        self.frequent = frequent
        self.fallback = fallback
        self.stream = stream if stream is not None else sys.stderr
        self._bar = None
        self._epoch = None
        self._use_tqdm = self._tqdm_usable() if force_tqdm is None else force_tqdm

    def _tqdm_usable(self):
        try:
            import tqdm  # noqa: F401
        except ImportError:
            return False
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def _guess_total(self, param):
        if self.total is not None:
            return self.total
        data = (getattr(param, "locals", None) or {}).get("train_data")
        num = getattr(data, "num_data", None)
        bsz = getattr(data, "batch_size", None)
        if num and bsz:
            return int(math.ceil(num / float(bsz)))
        return None

    def __call__(self, param):
        if not _is_train_param(param) or not is_rank0(param):
            return
        if param.epoch != self._epoch:
            self.close()
            self._epoch = param.epoch
            total = self._guess_total(param)
            if self._use_tqdm:
                import tqdm
                self._bar = tqdm.tqdm(total=total, desc="Epoch %d" % param.epoch,
                                      unit="batch", file=self.stream, leave=self.leave)
            else:
                self._bar = _TextBar(total, self.frequent) if self.fallback else None
        if self._bar is None:
            return
        postfix = {n: "%.4f" % v for n, v in _name_values(param.eval_metric, use_global=False)
                   if isinstance(v, float)}
        if self._use_tqdm:
            self._bar.set_postfix(postfix, refresh=False)
            self._bar.update(1)
            if self._bar.total is not None and self._bar.n >= self._bar.total:
                self.close()
        else:
            self._bar.update(param.nbatch, postfix)

    def close(self):
        if self._bar is not None and self._use_tqdm:
            self._bar.close()
        self._bar = None


class _TextBar:
    """MXNet's ProgressBar look: ``[=====-----] 50.0%`` logged every ``frequent`` batches."""

    def __init__(self, total, frequent, length=40):
        self.total = total
        self.frequent = frequent or (max(1, total // 10) if total else 50)
        self.length = length

    def update(self, nbatch, postfix):
        count = nbatch + 1
        if count % self.frequent and count != self.total:
            return
        extra = " ".join("%s=%s" % kv for kv in postfix.items())
        if self.total:
            filled = int(round(self.length * count / float(self.total)))
            pct = min(100.0, 100.0 * count / float(self.total))
            logging.info("[%s%s] %s%s %s", "=" * filled, "-" * (self.length - filled),
                         "%.1f" % pct, "%", extra)
        else:
            logging.info("batch %d %s", count, extra)


class History:
    """Records what ``fit`` measured, per epoch.

    Register the same object as batch-end, epoch-end and eval-end callback::

        hist = mx.callback.History()
        mod.fit(train, eval_data=val, num_epoch=10,
                batch_end_callback=hist, epoch_end_callback=hist, eval_end_callback=hist)
        hist.history["train-accuracy"], hist.history["validation-accuracy"], hist.history["time"]
    """

    def __init__(self):
        self.history = {}
        self.epochs = []
        self._last_train = []
        self._epoch_start = None

    def _append(self, key, value):
        self.history.setdefault(key, []).append(value)

    def __call__(self, *args):
        if len(args) == 4:
            self.on_epoch_end(*args)
            return
        (param,) = args
        if _is_train_param(param):
            self.on_batch_end(param)
        else:
            self.on_eval_end(param)

    def on_batch_end(self, param):
        if self._epoch_start is None:
            self._epoch_start = time.time()
        self._last_train = _name_values(param.eval_metric, use_global=True)

    def on_epoch_end(self, epoch, symbol=None, arg_params=None, aux_params=None):
        self.epochs.append(epoch)
        for name, value in self._last_train:
            self._append("train-%s" % name, float(value))
        elapsed = time.time() - self._epoch_start if self._epoch_start is not None else float("nan")
        self._append("time", elapsed)
        self._epoch_start = None

    def on_eval_end(self, param):
        for name, value in _name_values(param.eval_metric, use_global=False):
            self._append("validation-%s" % name, float(value))

    def last(self, key):
        values = self.history.get(key)
        return values[-1] if values else None


class EarlyStopping:
    """Stop ``fit`` when a monitored validation metric stops improving (eval-end callback).

    ``monitor`` is the metric name as ``score`` reports it (e.g. ``"accuracy"``, ``"mse"``);
    ``mode`` 'max', 'min' or 'auto' (min for names containing loss/error/mse/mae/rmse/
    perplexity/ce/nll, else max); training stops after ``patience`` evaluations without an
    improvement larger than ``min_delta``.
    """

    def __init__(self, monitor="accuracy", patience=3, min_delta=0.0, mode="auto"):
        if mode not in ("auto", "min", "max"):
            raise ValueError("mode must be 'auto', 'min' or 'max', got %r" % (mode,))
        self.monitor = monitor
        self.patience = int(patience)
        self.min_delta = abs(float(min_delta))
        if mode == "auto":
            lowered = monitor.lower()
            mode = "min" if any(t in lowered for t in (
                "loss", "error", "mse", "mae", "rmse", "perplexity", "ce", "nll")) else "max"
        self.mode = mode
        self.best = None
        self.wait = 0
        self.stopped_epoch = None

    def _improved(self, value):
        if self.best is None:
            return True
        if self.mode == "max":
            return value > self.best + self.min_delta
        return value < self.best - self.min_delta

    def __call__(self, param):
        values = dict(_name_values(param.eval_metric, use_global=False))
        if self.monitor not in values:
            raise KeyError("EarlyStopping: metric %r not among %s"
                           % (self.monitor, sorted(values)))
        value = float(values[self.monitor])
        if self._improved(value):
            self.best = value
            self.wait = 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = param.epoch
            logging.info("EarlyStopping: %s has not improved for %d evaluation(s); best %g",
                         self.monitor, self.wait, self.best)
            raise StopTraining("early stopping at epoch %d" % param.epoch)


class ReduceLROnPlateau:
    """Multiply the optimizer's learning rate by ``factor`` when a validation metric plateaus.

    Eval-end callback; it reaches the optimizer through ``param.locals['self']`` (the module
    ``score`` was called on), so it works for Module and BucketingModule alike.
    """

    def __init__(self, monitor="accuracy", factor=0.1, patience=2, min_lr=0.0, mode="auto",
                 min_delta=0.0):
        if not 0.0 < factor < 1.0:
            raise ValueError("factor must be in (0, 1), got %r" % (factor,))
        self._tracker = EarlyStopping(monitor, patience, min_delta, mode)
        self.factor = float(factor)
        self.min_lr = float(min_lr)

    def __call__(self, param):
        try:
            self._tracker(param)
        except StopTraining:
            self._tracker.wait = 0
            module = (param.locals or {}).get("self")
            optimizer = getattr(module, "_optimizer", None)
            if optimizer is None:
                return
            new_lr = max(self.min_lr, optimizer.learning_rate * self.factor)
            if optimizer.lr_scheduler is not None:
                optimizer.lr_scheduler.base_lr = new_lr
            else:
                optimizer.set_learning_rate(new_lr)
            logging.info("ReduceLROnPlateau: learning rate set to %g", new_lr)


class CSVLogger:
    """Append one CSV row per epoch (epoch, time, train-*, validation-*) to ``path``.

    Register as epoch-end AND eval-end callback (and as batch-end callback to get train
    metrics); the row for an epoch is written when its evaluation arrives, or at the next epoch's
    end when there is no eval data.
    """

    def __init__(self, path):
        self.path = path
        self._history = History()
        self._written = 0
        self._fields = None

    def __call__(self, *args):
        self._history(*args)
        if len(args) == 1 and not _is_train_param(args[0]):
            self._flush(upto=len(self._history.epochs))
        elif len(args) == 4:
            self._flush(upto=len(self._history.epochs) - 1)

    def _flush(self, upto):
        hist = self._history.history
        keys = sorted(hist)
        while self._written < upto:
            i = self._written
            row = {"epoch": self._history.epochs[i]}
            for key in keys:
                if i < len(hist[key]):
                    row[key] = hist[key][i]
            if self._fields is None:
                self._fields = ["epoch"] + keys
                new = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
                with open(self.path, "a", newline="") as f:
                    if new:
                        csv.DictWriter(f, self._fields).writeheader()
            with open(self.path, "a", newline="") as f:
                csv.DictWriter(f, self._fields, extrasaction="ignore").writerow(row)
            self._written += 1

    def close(self):
        """Write the last epoch's row if no evaluation followed it."""
        self._flush(upto=len(self._history.epochs))


def plot_history(history, path=None, keys=None, title=None):
    """Draw training curves from a :class:`History` (or its ``.history`` dict) with matplotlib.

    Works headless (the Agg backend is selected when no display is available). Returns the
    matplotlib Figure; with ``path`` it is also saved there (PNG by extension).
    """
    try:
        import matplotlib
    except ImportError:
        from .base import MXNetError
        raise MXNetError("plot_history needs matplotlib: pip install 'lightmod[plot]'") from None
    if not os.environ.get("DISPLAY") and matplotlib.get_backend().lower() != "agg":
        matplotlib.use("Agg")
    from matplotlib.figure import Figure

    data = history.history if isinstance(history, History) else dict(history)
    keys = [k for k in (keys or sorted(data)) if k != "time" and data.get(k)]
    metrics = sorted({k.split("-", 1)[1] for k in keys if "-" in k})
    # the x values are fit's epoch numbers, counted from 0 like its Epoch[N] log lines
    longest = max((len(data[k]) for k in keys), default=0)
    epochs = list(history.epochs) if isinstance(history, History) else []
    if len(epochs) < longest:
        epochs = list(range(longest))
    fig = Figure(figsize=(5.0 * max(1, len(metrics)), 3.6))
    for i, metric in enumerate(metrics or ["value"]):
        ax = fig.add_subplot(1, max(1, len(metrics)), i + 1)
        for key in keys:
            if key.split("-", 1)[-1] != metric:
                continue
            values = data[key]
            ax.plot(epochs[:len(values)], values, marker="o", label=key)
        ax.set_xlabel("epoch (as Epoch[N] in the log)")
        ax.set_ylabel(metric)
        ax.grid(True, alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=100)
    return fig
