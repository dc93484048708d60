"""Profiler (``mx.profiler``): per-operator timings written as Chrome trace JSON.

``set_config(filename=...)``, ``set_state('run')`` ... ``set_state('stop')``, ``dump()`` writes
the trace (open it in chrome://tracing or https://ui.perfetto.dev); ``dumps()`` returns the
aggregate table. While running, the executor records one event per operator call in forward
("<node>" in category "forward") and backward ("<node>_backward"); numba kernel compilation that
happens inside a call is recorded separately (category "compile", named after the kernel) and
subtracted from the operator's own time, so first-call JIT cost never masquerades as run time.
Module code can add its own events with ``Domain``/``Task``/``Frame``/``Event``/``Counter``/
``Marker`` as in MXNet.
"""
import json
import os
import threading
import time

from .base import MXNetError

__all__ = ["set_config", "set_state", "state", "dump", "dumps", "pause", "resume", "is_running",
           "profiler_set_config", "profiler_set_state", "dump_profile", "Domain", "Task", "Frame",
           "Event", "Counter", "Marker", "scope", "record"]

_lock = threading.Lock()
_config = {"filename": "profile.json", "profile_all": False, "profile_symbolic": True,
           "profile_imperative": True, "profile_memory": False, "profile_api": False,
           "continuous_dump": False, "aggregate_stats": False}
_state = {"running": False, "paused": False}
_events = []          # Chrome trace events
_compile_stack = []   # start times of numba compilations in progress (nested compiles happen)
_compile_total = [0.0]  # seconds spent compiling since the profiler started
_listener = None
_t0 = time.perf_counter()


def _now_us():
    return (time.perf_counter() - _t0) * 1e6


def set_config(**kwargs):
    """Set profiler options (MXNet's names; unknown names raise MXNetError)."""
    for key, value in kwargs.items():
        if key not in _config and key not in ("profile_process",):
            raise MXNetError("profiler.set_config: unknown option %r (known: %s)"
                             % (key, ", ".join(sorted(_config))))
        _config[key] = value


def profiler_set_config(mode="symbolic", filename="profile.json"):
    """Legacy spelling of :func:`set_config`."""
    set_config(filename=filename, profile_all=(mode == "all"))


def _install_compile_listener():
    global _listener
    if _listener is not None:
        return
    from numba.core import event

    class _CompileListener(event.Listener):
        def on_start(self, ev):
            _compile_stack.append(time.perf_counter())

        def on_end(self, ev):
            if not _compile_stack:
                return
            start = _compile_stack.pop()
            if _compile_stack:
                return  # a nested compile is part of the outer one
            seconds = time.perf_counter() - start
            _compile_total[0] += seconds
            disp = (ev.data or {}).get("dispatcher")
            name = getattr(getattr(disp, "py_func", None), "__qualname__", "numba kernel")
            _append({"name": "compile %s" % name, "cat": "compile", "ph": "X",
                     "ts": (start - _t0) * 1e6, "dur": seconds * 1e6, "pid": os.getpid(),
                     "tid": threading.get_ident() % 100000})

    _listener = _CompileListener()
    event.register("numba:compile", _listener)


def _remove_compile_listener():
    global _listener
    if _listener is None:
        return
    from numba.core import event
    event.unregister("numba:compile", _listener)
    _listener = None


def set_state(state="stop", profile_process="worker"):
    """'run' starts recording, 'stop' stops it."""
    if state not in ("run", "stop"):
        raise MXNetError("profiler.set_state: state must be 'run' or 'stop', got %r" % (state,))
    running = state == "run"
    if running and not _state["running"]:
        _install_compile_listener()
    elif not running:
        _remove_compile_listener()
    _state["running"] = running
    _state["paused"] = False


profiler_set_state = set_state


def state():
    return "run" if _state["running"] else "stop"


def is_running():
    """True while events are being recorded (running and not paused)."""
    return _state["running"] and not _state["paused"]


def pause(profile_process="worker"):
    _state["paused"] = True


def resume(profile_process="worker"):
    _state["paused"] = False


def _append(event):
    with _lock:
        _events.append(event)


def compile_seconds():
    """Seconds numba spent compiling while the profiler ran (a running total)."""
    return _compile_total[0]


def record(name, category, start, end, compile_during=0.0, args=None):
    """Record one operator call that ran from ``start`` to ``end`` (perf_counter seconds).

    ``compile_during`` is the compile time that happened inside the call; it is subtracted
    and kept in ``args['compile_ms']``.
    """
    dur = max(0.0, end - start - compile_during)
    event = {"name": name, "cat": category, "ph": "X", "ts": (start - _t0) * 1e6,
             "dur": dur * 1e6, "pid": os.getpid(), "tid": threading.get_ident() % 100000}
    if compile_during or args:
        event["args"] = dict(args or {})
        if compile_during:
            event["args"]["compile_ms"] = compile_during * 1e3
    _append(event)


class scope:
    """Context manager timing a block as one event: ``with profiler.scope('load', 'io'):``."""

    def __init__(self, name, category="user"):
        self.name = name
        self.category = category

    def __enter__(self):
        self._start = time.perf_counter()
        self._compile = compile_seconds()
        return self

    def __exit__(self, *exc):
        if is_running():
            record(self.name, self.category, self._start, time.perf_counter(),
                   compile_seconds() - self._compile)


def dump(finished=True, profile_process="worker"):
    """Write the events recorded so far as Chrome trace JSON to the configured filename."""
    with _lock:
        events = list(_events)
    trace = {"traceEvents": events, "displayTimeUnit": "ms",
             "otherData": {"producer": "lightmod", "compile_seconds": compile_seconds()}}
    path = _config["filename"]
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(trace, f)
    os.replace(tmp, path)
    if finished:
        set_state("stop")


dump_profile = dump


def dumps(reset=False, format="table", sort_by="total", ascending=False):
    """Aggregate statistics per (category, name): count, total/min/max/avg milliseconds."""
    if format not in ("table", "json"):
        raise MXNetError("profiler.dumps: format must be 'table' or 'json', got %r" % (format,))
    if sort_by not in ("total", "avg", "min", "max", "count"):
        raise MXNetError("profiler.dumps: sort_by must be total/avg/min/max/count, got %r"
                         % (sort_by,))
    stats = {}
    with _lock:
        events = list(_events)
        if reset:
            _events.clear()
    for ev in events:
        if ev.get("ph") != "X":
            continue
        key = (ev["cat"], ev["name"])
        ms = ev["dur"] / 1e3
        s = stats.setdefault(key, {"count": 0, "total": 0.0, "min": float("inf"), "max": 0.0})
        s["count"] += 1
        s["total"] += ms
        s["min"] = min(s["min"], ms)
        s["max"] = max(s["max"], ms)
    for s in stats.values():
        s["avg"] = s["total"] / s["count"]
    rows = sorted(stats.items(), key=lambda kv: kv[1][sort_by], reverse=not ascending)
    if format == "json":
        # MXNet's layout: {"Time": {category: {name: {"Count", "Total", "Min", "Max", "Avg"}}},
        # "Memory": {...}, "Unit": {...}}, each category's entries in the requested order.
        # lightmod records no memory statistics, so "Memory" is empty.
        by_category = {}
        for (cat, name), s in rows:
            by_category.setdefault(cat, {})[name] = {
                "Count": s["count"], "Total": s["total"], "Min": s["min"], "Max": s["max"],
                "Avg": s["avg"]}
        return json.dumps({"Time": by_category, "Memory": {},
                           "Unit": {"Time": "ms", "Memory": "kB"}})
    lines = ["Profile Statistics (milliseconds; compile time listed separately)",
             "%-12s %-40s %8s %12s %10s %10s %10s" % ("Category", "Name", "Count", "Total",
                                                     "Min", "Max", "Avg")]
    for (cat, name), s in rows:
        lines.append("%-12s %-40s %8d %12.4f %10.4f %10.4f %10.4f"
                     % (cat, name[:40], s["count"], s["total"], s["min"], s["max"], s["avg"]))
    return "\n".join(lines)


class Domain:
    """A named group of user events (MXNet's profiler.Domain)."""

    def __init__(self, name):
        self.name = name

    def new_task(self, name):
        return Task(self, name)

    def new_frame(self, name):
        return Frame(self, name)

    def new_counter(self, name, value=None):
        return Counter(self, name, value)

    def new_marker(self, name):
        return Marker(self, name)

    def __str__(self):
        return self.name


class _Span:
    category = "task"

    def __init__(self, domain, name):
        self.domain = domain
        self.name = name
        self._start = None

    def start(self):
        self._start = time.perf_counter()

    def stop(self):
        if self._start is None:
            raise MXNetError("profiler %s %r stopped before it was started"
                             % (self.category, self.name))
        if is_running():
            record(self.name, "%s:%s" % (self.domain, self.category), self._start,
                   time.perf_counter())
        self._start = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


class Task(_Span):
    category = "task"


class Frame(_Span):
    category = "frame"


class Event(_Span):
    """A user event not tied to a domain."""
    category = "event"

    def __init__(self, name):
        super().__init__(Domain("event"), name)


class Counter:
    def __init__(self, domain, name, value=None):
        self.domain = domain
        self.name = name
        self.value = 0
        if value is not None:
            self.set_value(value)

    def set_value(self, value):
        self.value = value
        if is_running():
            _append({"name": self.name, "cat": str(self.domain), "ph": "C", "ts": _now_us(),
                     "pid": os.getpid(), "args": {self.name: value}})

    def increment(self, delta=1):
        self.set_value(self.value + delta)

    def decrement(self, delta=1):
        self.set_value(self.value - delta)

    def __iadd__(self, delta):
        self.increment(delta)
        return self

    def __isub__(self, delta):
        self.decrement(delta)
        return self


class Marker:
    def __init__(self, domain, name):
        self.domain = domain
        self.name = name

    def mark(self, scope="process"):
        if is_running():
            _append({"name": self.name, "cat": str(self.domain), "ph": "i", "ts": _now_us(),
                     "s": {"global": "g", "process": "p", "thread": "t"}.get(scope, "p"),
                     "pid": os.getpid(), "tid": threading.get_ident() % 100000})
