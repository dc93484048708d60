"""Direct data gradient of convolutions of images with few channels (CPU).

The data gradient of a convolution of a 2-4 channel image (a ResNet stem: 3 -> 32 channels,
3x3) through the column layout multiplies the transposed weights (C*KH*KW, F), (27, 32), by
the output gradient (F, n*O): a thin product BLAS runs far below its peak, followed by a col2im
pass. Here every input-gradient element is summed in registers instead, straight from the
output gradient.

**Wide rows.** At stride 1 the data gradient is the correlation of the output gradient,
zero-padded to ``(HQ, WQ) = (H + (KH-1)*DH, W + (KW-1)*DW)``, with the kernels turned by 180
degrees, summed over the filters: input pixel (ih, iw) reads the padded plane at
``p + (KH-1-kh)*DH*WQ + (KW-1-kw)*DW`` with ``p = ih*WQ + iw``. Computing every p of
``[0, (H-1)*WQ + W)``, the columns ``iw >= W`` included (discarded), makes each tap one run over
consecutive p at a constant offset. One pass per filter sums its KH*KW taps for all C
channels::

    wide_c[p] += w[f, c, 0] * dy_f[p + o0] + ... + w[f, c, K-1] * dy_f[p + o(K-1)]

with the filter's weights read before the loop: LLVM vectorises it over p with the sums in
registers, each output-gradient load feeding the C channels' multiply-adds. The positions are
split into a few streams computed side by side (independent sums, so the adds' latency
overlaps). The source is written out per kernel geometry and image size, so every offset is a
constant (with run-time offsets LLVM adds an overlap check per pair of runs and gives up
vectorising), generated and compiled once and cached on disk like the fused element-wise
kernels (``kernels/fused.py``'s ``load_module``; a few seconds per new geometry). A last pass
copies the W valid columns of each wide row into the gradient (or adds them).

Each element is summed in one fixed order whatever the thread count, so the bits never vary.
The images are split between threads (``run_parts`` of kernels/cpu/conv.py), one padded
output gradient and wide-row scratch per thread.

**Not used for the forward.** The same scheme for the forward pass (4 filters x 3 streams
per pass, each input load feeding 12 sums) ran at 53-56 GFLOP/s per thread on LeNet's conv1
and the ResNet stem, where the column layout's compiled chunk loop (kernels/cpu/conv.py) runs
61-63: it is load-bound (every tap is an unaligned vector load) where the BLAS product reuses
registers. Nor for one-channel images (below).
"""
import hashlib
import threading

import numpy as np
from numba import njit, uint64

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import fused as _fused
from .conv import run_parts
from .jit import task_count

__all__ = ["direct_conv_fits", "direct_conv_backward_data"]

# Input channels of a direct data gradient at most (each adds C sums per load; with more
# channels the patch-row layout's products run near the BLAS peak anyway)
DIRECT_MAX_CHANNELS = 4
# (streams, weights hoisted out of the loop): one filter per pass, its weights held in
# registers, 4 streams of independent sums (measured on the ResNet stem, 2-core Zen 4: 61
# GFLOP/s per thread against 48 for the column layout's product and col2im)
BACKWARD_CONFIG = (4, True)
# the streams' lengths are multiples of this (AVX-512 float32 vectors)
VECTOR = 16


def direct_conv_fits(x5, g, groups, dtype):
    """Whether the direct data gradient takes this convolution: float32 or float64,
    ungrouped, 1-D or 2-D, stride 1, 2 to DIRECT_MAX_CHANNELS input channels (x5 the data's
    5-D shape, g the geometry tuple of kernels/cpu/conv.py). A one-channel image stays with
    the column layout: each output-gradient load then feeds a single multiply-add and the
    pass runs at the loads' speed (LeNet's conv1: 47-54 GFLOP/s per thread against 54)."""
    KD, SD, SH, SW = g[0], g[3], g[4], g[5]
    return (np.dtype(dtype) in (np.float32, np.float64) and groups == 1 and x5[2] == 1
            and KD == 1 and SD == 1 and SH == 1 and SW == 1
            and 2 <= x5[1] <= DIRECT_MAX_CHANNELS)


# ---------------------------------------------------------------------------------------------
# Geometry-independent passes (the generated modules import them)
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def place(src, s0, H, W, dst, d0, HP, WP, top, left):
    """dst plane (HP, WP) at d0 = src plane (H, W) at s0 moved down by ``top`` rows and right
    by ``left`` columns (negative: cut off), zero elsewhere."""
    zero = dst.dtype.type(0)
    c0 = max(0, left)
    c1 = min(WP, W + left)
    for a in range(HP):
        r = a - top
        d = uint64(d0 + a * WP)
        if r < 0 or r >= H or c1 <= c0:
            for b in range(uint64(WP)):
                dst[d + b] = zero
            continue
        for b in range(uint64(c0)):
            dst[d + b] = zero
        s = uint64(s0 + r * W + c0 - left)
        d1 = d + uint64(c0)
        for b in range(uint64(c1 - c0)):
            dst[d1 + b] = src[s + b]
        for b in range(uint64(c1), uint64(WP)):
            dst[d + b] = zero


@njit(cache=True, nogil=True)
def compact(wide, w0, WQ, out, o0, H, W, accumulate):
    """out plane (H, W) at o0 = (or +=) the first W columns of the wide rows at w0 (WQ
    apart)."""
    for r in range(H):
        src = uint64(w0 + r * WQ)
        dst = uint64(o0 + r * W)
        if accumulate:
            for c in range(uint64(W)):
                out[dst + c] += wide[src + c]
        else:
            for c in range(uint64(W)):
                out[dst + c] = wide[src + c]


# ---------------------------------------------------------------------------------------------
# Generated source
# ---------------------------------------------------------------------------------------------
def _run_length(count, streams):
    """Positions per stream for ``streams`` streams covering ``count``: whole vectors of
    VECTOR elements (a loop's remainder runs one element at a time: with runs of 223
    positions, 15 of them took as long as the other 208)."""
    per_stream = -(-count // streams)
    return -(-per_stream // VECTOR) * VECTOR


def _pass(name, args, bases, hoisted, body, run):
    """One generated pass: ``bases`` (local name, expression) and ``hoisted`` statements
    before the loop over p < run, ``body`` statements in it."""
    lines = ["@njit(cache=_CACHE, nogil=True, fastmath=_FAST)", "def %s(%s):" % (name, args)]
    lines += ["    %s = uint64(%s)" % b for b in bases]
    lines += ["    " + st for st in hoisted]
    lines.append("    for p in range(uint64(%d)):" % run)
    lines += ["        " + st for st in body]
    return lines


def _tap_major(taps, starts, sums, hoist, store):
    """(hoisted, body) of a pass summing products tap after tap, so that only the sums, one
    tap's loads and its weights are live at once (LLVM keeps the statements' order).

    ``taps``: (array, offset) per tap; ``sums``: per sum, its (tap index, weight index) terms;
    a sum s of stream j is ``a<s>_<j>``, stored by ``store(s, j, name)``."""
    hoisted, body = [], []
    weights = {}
    for s_terms in sums:
        for _, wi in s_terms:
            weights.setdefault(wi, "w%d" % len(weights))
    if hoist:
        hoisted = ["%s = w[wo + uint64(%d)]" % (name, wi) for wi, name in weights.items()]
    started = set()
    for t, (arr, off) in enumerate(taps):
        body += ["v%d = %s[%sb + p + uint64(%d)]" % (j, arr, arr[0], s + off)
                 for j, s in enumerate(starts)]
        for si, s_terms in enumerate(sums):
            for tt, wi in s_terms:
                if tt != t:
                    continue
                wname = weights[wi]
                if not hoist:
                    body.append("%s = w[wo + uint64(%d)]" % (wname, wi))
                for j in range(len(starts)):
                    acc = "a%d_%d" % (si, j)
                    if acc in started:
                        body.append("%s = %s + %s * v%d" % (acc, acc, wname, j))
                    else:
                        body.append("%s = %s * v%d" % (acc, wname, j))
                        started.add(acc)
    for si in range(len(sums)):
        for j in range(len(starts)):
            body.append(store(si, j, "a%d_%d" % (si, j)))
    return hoisted, body


def backward_source(C, KH, KW, DH, DW, H, W):
    """The generated data-gradient module of one geometry and image size (H, W)."""
    streams, hoist = BACKWARD_CONFIG
    HQ, WQ = H + (KH - 1) * DH, W + (KW - 1) * DW
    # streams that never overlap (the passes after the first add into the wide rows): the
    # rows are rounded up to whole streams, the last stream reading into the scratch's slack
    run = _run_length((H - 1) * WQ + W, streams)
    count = run * streams
    starts = [j * run for j in range(streams)]
    K = KH * KW
    taps = [("dy", (KH - 1 - kh) * DH * WQ + (KW - 1 - kw) * DW)
            for kh in range(KH) for kw in range(KW)]
    sums = [[(k, c * K + k) for k in range(K)] for c in range(C)]
    lines = ["# direct data gradient: %d channels, kernel %dx%d, dilation %dx%d, image %dx%d"
             % (C, KH, KW, DH, DW, H, W),
             # the helpers are compiled into these kernels: an edit of them must make a new
             # file (numba's disk cache does not follow calls into other files)
             "# helpers %s" % _helpers_digest(),
             "from numba import njit, uint64",
             "from %s import place, compact" % __name__,
             "_FAST = {'contract'}",
             "WIDE = %d  # wide-row elements per channel" % count, ""]
    for op in ("=", "+="):
        hoisted, body = _tap_major(
            taps, starts, sums, hoist,
            lambda c, j, acc, op=op: "wide[wb + p + uint64(%d)] %s %s" % (
                c * count + starts[j], op, acc))
        lines += _pass("_backward_" + ("write" if op == "=" else "add"),
                       "dy, db, w, wo, wide, wb", [("db", "db"), ("wo", "wo"), ("wb", "wb")],
                       hoisted, body, run) + [""]
    lines.append(_DRIVER.format(C=C, K=K, H=H, W=W, HQ=HQ, WQ=WQ, top=(KH - 1) * DH,
                                left=(KW - 1) * DW, count=count))
    return "\n".join(lines) + "\n"


# images [n0, n1) with the scratch of part ``part`` (one part per thread)
_DRIVER = """
@njit(cache=_CACHE, nogil=True)
def backward_images(dy, F, OH, OW, PH, PW, w, dx, dyp, wide, part, n0, n1, accumulate):
    db = part * F * {HQ} * {WQ}
    wb = part * {C} * {count}
    for img in range(n0, n1):
        for f in range(F):
            place(dy, (img * F + f) * OH * OW, OH, OW, dyp, db + f * {HQ} * {WQ}, {HQ}, {WQ},
                  {top} - PH, {left} - PW)
        _backward_write(dyp, db, w, 0, wide, wb)
        for f in range(1, F):
            _backward_add(dyp, db + f * {HQ} * {WQ}, w, f * {C} * {K}, wide, wb)
        for c in range({C}):
            compact(wide, wb + c * {count}, {WQ}, dx, (img * {C} + c) * {H} * {W}, {H}, {W},
                    accumulate)
"""


def _helpers_digest():
    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


_modules = {}
_modules_lock = threading.Lock()


def _module(*key):
    """The compiled module of ``backward_source(*key)`` (loaded once per process)."""
    mod = _modules.get(key)
    if mod is None:
        with _modules_lock:
            mod = _modules.get(key)
            if mod is None:
                mod = _modules[key] = _fused.load_module("conv_direct", backward_source(*key))
    return mod


# ---------------------------------------------------------------------------------------------
# Launcher
# ---------------------------------------------------------------------------------------------
def direct_conv_backward_data(dy, w, dx, x5, g, accumulate=False, work=None):
    """dx (n, C, H, W) = (or +=) the data gradient of a convolution that
    ``direct_conv_fits`` (x5 its data's 5-D shape, g the geometry tuple) from dy (n, F, OH,
    OW) and the weights w (F, C, KH, KW). ``work`` (a dict, the node's state) keeps the
    scratch between calls. False (nothing done) unless every array is C-contiguous of dx's
    dtype."""
    if not all(a.dtype == dx.dtype and a.flags.c_contiguous for a in (dy, w, dx)):
        return False
    n, C, _, H, W = x5
    KH, KW, PH, PW, DH, DW = g[1], g[2], g[7], g[8], g[10], g[11]
    OH, OW = g[13], g[14]
    F = w.shape[0]
    mod = _module(C, KH, KW, DH, DW, H, W)
    HQ, WQ = H + (KH - 1) * DH, W + (KW - 1) * DW
    parts = task_count(n * F * H * W * C * KH * KW, n)
    # the last stream reads up to a stream's length past the padded planes (those sums are
    # discarded; the slack is zero so they stay finite)
    dyp = _scratch(work, "direct_dyp", parts * F * HQ * WQ + mod.WIDE, dx.dtype)
    wide = _scratch(work, "direct_wide", parts * C * mod.WIDE, dx.dtype)
    flat_dy, flat_w, flat_dx = dy.reshape(-1), w.reshape(-1), dx.reshape(-1)

    def run(part):
        mod.backward_images(flat_dy, F, OH, OW, PH, PW, flat_w, flat_dx, dyp, wide, part,
                            part * n // parts, (part + 1) * n // parts, accumulate)

    run_parts(run, parts)
    return True


def _scratch(work, key, size, dtype):
    """A zeroed work array of ``work`` (a dict; None: a new one), reallocated only when its
    size or dtype change."""
    buf = None if work is None else work.get(key)
    if buf is None or buf.size != size or buf.dtype != dtype:
        buf = np.zeros(size, dtype)
        if work is not None:
            work[key] = buf
    return buf
