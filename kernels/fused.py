"""Fused element-wise kernels: the source of one loop body per fused group, shared by both halves.

A fused group is a small graph of element-wise operators over arrays of one shape, described by
a *spec* (plain tuples, hashable)::

    (dtype, n_leaves, nodes, out_grads, leaf_reqs)

* values are numbered: ``0 .. n_leaves-1`` are the leaves (arrays computed outside the group),
  node ``i`` produces value ``n_leaves + i``;
* ``nodes``: ``(kind, args, inputs, zero_grad)`` in topological order, with ``kind`` one of
  ``"unary"`` (args: a code of ``scalar.UNARY_CODES``), ``"act"`` (a code of
  ``scalar_nn.ACTIVATIONS``), ``"binary"`` (a code of ``scalar.BINARY_CODES``) or ``"scalar"``
  (args: ``(code, value, reverse)``); ``zero_grad``: the operator passes no gradient back;
* ``out_grads``: the values whose gradient arrives from outside the group (in argument order);
* ``leaf_reqs``: per leaf, 0 (no gradient), 1 (write) or 2 (add).

Every kernel sees its arrays as 2-d ``(rows, cols)`` views (a slice of a wider array along its
columns is such a view), so one index pair addresses every operand.

The forward body computes each node from its inputs with the per-element functions of
``scalar.py`` / ``scalar_nn.py`` (the math the unfused kernels run), rounding every node's
value to the dtype as the unfused kernels do by storing it, and stores every node's value. The
backward body reads the stored values, walks the nodes in reverse accumulating each value's
gradient in a local, and writes (or adds) the leaves' gradients: one pass, no temporaries.

:func:`body_lines` writes the body once; ``cpu/fused.py`` wraps it in a row loop (``prange``)
and ``cuda/fused.py`` in a grid-stride loop. :func:`load_module` turns a generated source into
a module: written (whole, under a temporary name then renamed: processes may make the same
module at once) under the cache directory (``LIGHTMOD_CACHE_DIR``, else
``$XDG_CACHE_HOME/lightmod`` or ``~/.cache/lightmod``), in ``fused/v-<package digest>``, so
numba's ``cache=True`` keeps the compiled code across processes, keyed by a digest of the source
and of the whole kernels package (a new bucket length or a new bind compiles nothing; an edit of
any kernel file, or another version, makes new files; a version's folder unused for 30 days is
removed). The folder is registered with ``cache_stamp`` so that its kernels use the entry cache
that processes can share.
"""
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import time

from . import cache_stamp, scalar

__all__ = ["body_lines", "load_module", "spec_arrays", "source_digest"]

_lock = threading.Lock()
_modules = {}   # source digest -> loaded module (the in-process cache)


def spec_arrays(spec):
    """(forward argument count, backward argument count) of the spec's kernels."""
    _, n_leaves, nodes, out_grads, leaf_reqs = spec
    n_values = n_leaves + len(nodes)
    n_written = sum(1 for r in leaf_reqs if r)
    return n_leaves + len(nodes), n_values + len(out_grads) + n_written


def _node_expr(kind, args, inputs):
    """The forward value of one node as an expression of its inputs' locals."""
    xs = ["x%d" % i for i in inputs]
    if kind == "unary":
        return "S.unary(%d, %s)" % (args, xs[0])
    if kind == "act":
        return "N.activation_value(%s, %d)" % (xs[0], args)
    if kind == "binary":
        return "S.binary(%d, %s, %s)" % (args, xs[0], xs[1])
    code, value, reverse = args
    const = "_dt(%r)" % float(value)
    return "S.binary(%d, %s, %s)" % ((code, const, xs[0]) if reverse else (code, xs[0], const))


def _grad_terms(kind, args, inputs, out):
    """(input value, d node / d input expression) pairs of one node."""
    xs = ["x%d" % i for i in inputs]
    y = "x%d" % out
    if kind == "unary":
        return [(inputs[0], "S.unary_grad(%d, %s, %s)" % (args, xs[0], y))]
    if kind == "act":
        return [(inputs[0], "N.activation_slope(%s, %s, %d)" % (xs[0], y, args))]
    if kind == "binary":
        return [(inputs[0], "S.binary_grad_lhs(%d, %s, %s)" % (args, xs[0], xs[1])),
                (inputs[1], "S.binary_grad_rhs(%d, %s, %s)" % (args, xs[0], xs[1]))]
    code, value, reverse = args
    const = "_dt(%r)" % float(value)
    if reverse:
        return [(inputs[0], "S.binary_grad_rhs(%d, %s, %s)" % (code, const, xs[0]))]
    return [(inputs[0], "S.binary_grad_lhs(%d, %s, %s)" % (code, xs[0], const))]


def body_lines(spec, direction):
    """The per-element statements of the forward or backward kernel, indexing ``[r, c]``.

    Forward arguments: ``v0 .. v{L-1}`` (leaves), then ``o0 ..`` (one per node). Backward
    arguments: ``v0 .. v{n-1}`` (every value), ``go0 ..`` (per ``out_grads``), ``d0 ..``
    (per leaf with a gradient)."""
    _, n_leaves, nodes, out_grads, leaf_reqs = spec
    lines = []
    if direction == "forward":
        for i in range(n_leaves):
            lines.append("x%d = v%d[r, c]" % (i, i))
        for j, (kind, args, inputs, _) in enumerate(nodes):
            out = n_leaves + j
            lines.append("x%d = _dt(%s)" % (out, _node_expr(kind, args, inputs)))
            lines.append("o%d[r, c] = x%d" % (j, out))
        return lines
    n_values = n_leaves + len(nodes)
    for i in range(n_values):
        lines.append("x%d = v%d[r, c]" % (i, i))
    incoming = {v: "go%d[r, c]" % j for j, v in enumerate(out_grads)}
    for v in range(n_values):
        lines.append("g%d = %s" % (v, incoming.get(v, "_zero")))
    for j in range(len(nodes) - 1, -1, -1):
        kind, args, inputs, zero_grad = nodes[j]
        if zero_grad:
            continue
        out = n_leaves + j
        for src, slope in _grad_terms(kind, args, inputs, out):
            lines.append("g%d += g%d * %s" % (src, out, slope))
    d = 0
    for leaf, req in enumerate(leaf_reqs):
        if req == 1:
            lines.append("d%d[r, c] = g%d" % (d, leaf))
        elif req == 2:
            lines.append("d%d[r, c] += g%d" % (d, leaf))
        d += 1 if req else 0
    return lines


def arg_names(spec, direction):
    _, n_leaves, nodes, out_grads, leaf_reqs = spec
    if direction == "forward":
        return ["v%d" % i for i in range(n_leaves)] + ["o%d" % j for j in range(len(nodes))]
    n_written = sum(1 for r in leaf_reqs if r)
    return (["v%d" % i for i in range(n_leaves + len(nodes))] +
            ["go%d" % j for j in range(len(out_grads))] + ["d%d" % j for j in range(n_written)])


def header(spec):
    """The imports and constants every generated module starts with."""
    dtype = spec[0]
    return ["import numpy as np",
            "from %s import scalar as S" % scalar.__name__.rpartition(".")[0],
            "from %s import scalar_nn as N" % scalar.__name__.rpartition(".")[0],
            "_dt = np.%s" % dtype,
            "_zero = _dt(0)"]


def source_digest(source):
    """The key of a generated source: a digest of it and of the whole kernels package, whose
    functions the generated kernels inline (``cache_stamp.py``), so that another version of
    lightmod sharing the cache folder never loads code compiled against other math."""
    return hashlib.sha256((cache_stamp.package_digest() + source).encode()).hexdigest()[:24]


# A version's folder unused (its modification time not refreshed by a process loading from it)
# for this long is removed by the next process that writes generated sources.
STALE_FOLDER_SECONDS = 30 * 24 * 3600
_folder = None      # this process's folder, once made (and its siblings pruned)


def _cache_root():
    base = os.environ.get("LIGHTMOD_CACHE_DIR")
    if not base:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or
                            os.path.join(os.path.expanduser("~"), ".cache"), "lightmod")
    return os.path.join(base, "fused")


def _prune(root, keep, now):
    """Remove the version folders under ``root`` other than ``keep`` that no process has used
    for STALE_FOLDER_SECONDS (another lightmod still in use refreshes its own on every start).
    Errors (a folder another process is removing, permissions) are ignored."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        path = os.path.join(root, name)
        if name == keep or not name.startswith("v-") or not os.path.isdir(path):
            continue
        try:
            if now - os.stat(path).st_mtime > STALE_FOLDER_SECONDS:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def _cache_dir():
    """The folder of this kernels package's generated sources: one per package digest, so
    that each version of lightmod keeps its own files and a version no longer used is removed
    after a while. Made, touched (its time marks it as in use) and its stale siblings pruned
    once per process."""
    global _folder
    if _folder is None:
        root = _cache_root()
        name = "v-" + cache_stamp.package_digest()[:16]
        folder = os.path.join(root, name)
        os.makedirs(folder, exist_ok=True)
        now = time.time()
        os.utime(folder, (now, now))
        _prune(root, name, now)
        cache_stamp.register_generated_folder(folder)
        _folder = folder
    return _folder


def _write_source(path, source):
    """Make ``path`` hold ``source``. Several processes may make the same module at once: each
    writes a temporary file of its own and renames it into place, so an importer reads a whole
    file, never one being written. A file already there with other contents (cut short by a
    crash or a full disk) is replaced the same way."""
    try:
        with open(path) as f:
            if f.read() == source:
                return
    except FileNotFoundError:
        pass
    folder, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix="." + name + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load_module(prefix, source):
    """The module of a generated source (loaded once per process; written under the cache
    directory when it is writable, so numba's disk cache applies; else executed in memory).
    The source reads the global ``_CACHE`` (whether ``cache=True`` can work) set here."""
    digest = source_digest(source)
    with _lock:
        mod = _modules.get(digest)
        if mod is not None:
            return mod
        name = "lightmod_%s_%s" % (prefix, digest)
        path = None
        try:
            folder = _cache_dir()
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, name + ".py")
            _write_source(path, source)
        except (OSError, UnicodeDecodeError):
            path = None
        if path is not None:
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            mod._CACHE = True
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        else:
            mod = type(sys)(name)
            mod._CACHE = False      # numba caches only functions that live in a file
            exec(compile(source, "<%s>" % name, "exec"), mod.__dict__)
        _modules[digest] = mod
        return mod
