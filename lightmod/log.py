"""``mx.log``: MXNet's logging helpers (``get_logger`` and the level constants).

A named logger made by ``get_logger`` writes to stderr in MXNet's glog-like layout, coloured by
level::

    W1127 21:30:00 12345 /path/train.py:main:42] message

(a letter for the level, month+day, time, process id, file:function:line). With ``filename``
the records go to that file instead, through the standard layout (no colour codes in files).
A logger is set up once: later calls with the same name return it unchanged.
"""
import logging
import warnings

CRITICAL = logging.CRITICAL
ERROR = logging.ERROR
WARNING = logging.WARNING
INFO = logging.INFO
DEBUG = logging.DEBUG
NOTSET = logging.NOTSET

__all__ = ["CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG", "NOTSET", "get_logger", "getLogger"]

_LETTERS = {CRITICAL: "C", ERROR: "E", WARNING: "W", INFO: "I", DEBUG: "D"}
_RED, _GREEN, _BLUE, _RESET = "\x1b[31m", "\x1b[32m", "\x1b[34m", "\x1b[0m"


class _Formatter(logging.Formatter):
    """glog-like records: colour and level letter, then date, pid and the call site."""

    def __init__(self):
        super().__init__(datefmt="%m%d %H:%M:%S")

    @staticmethod
    def _colour(level):
        if level >= WARNING:
            return _RED
        return _GREEN if level >= INFO else _BLUE

    def format(self, record):
        head = self._colour(record.levelno) + _LETTERS.get(record.levelno, "U")
        self._style._fmt = (head + "%(asctime)s %(process)d %(pathname)s:%(funcName)s:"
                            "%(lineno)d]" + _RESET + " %(message)s")
        return super().format(record)


def get_logger(name=None, filename=None, filemode=None, level=WARNING):
    """The logger ``name``, given (once) a handler and ``level``.

    ``filename``: write there (mode ``filemode``, default 'a') instead of to stderr. The root
    logger (``name=None``) is returned as it is, never configured.
    """
    logger = logging.getLogger(name)
    if name is None or getattr(logger, "_init_done", False):
        return logger
    logger._init_done = True
    if filename:
        handler = logging.FileHandler(filename, filemode or "a")
    else:
        handler = logging.StreamHandler()
        handler.setFormatter(_Formatter())
    logger.addHandler(handler)
    logger.setLevel(level)
    return logger


def getLogger(name=None, filename=None, filemode=None, level=WARNING):
    """Deprecated spelling of :func:`get_logger` (warns, as MXNet does)."""
    warnings.warn("getLogger is deprecated, Use get_logger instead.", DeprecationWarning,
                  stacklevel=2)
    return get_logger(name, filename, filemode, level)
