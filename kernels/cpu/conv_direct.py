"""Direct convolution for images with few channels (CPU): forward and data gradient.

A convolution of a 1-3 channel image (LeNet's first layer, a ResNet stem) multiplies a thin
weight matrix, (20, 25) or (32, 27), by a wide column matrix: BLAS runs such products far
below its peak, and building the columns costs as much again. Here every output is computed
in registers instead, from the (padded) image itself.

**Wide rows.** At stride 1 an output pixel (oh, ow) reads the input at (oh + kh*DH, ow + kw*DW)
of the padded image: in the flat padded plane, at ``p + kh*DH*Wp + kw*DW`` with
``p = oh*Wp + ow`` (Wp: padded width). Computing every p of ``[0, (OH-1)*Wp + OW)``, the columns
``ow >= OW`` included (their values are discarded), makes each tap one run over consecutive p
at a constant offset. The loop over p then sums all taps of all channels in one expression::

    wide[p] = w0 * x[p + o0] + w1 * x[p + o1] + ... + w24 * x[p + o24]

with the weights read once before the loop: LLVM vectorises it over p with the sums in
registers (a load and a fused multiply-add per tap and 16 outputs, one store). The expression
is written out for each kernel geometry (channels, kernel size, dilation): the source is
generated and compiled once per geometry, and cached on disk like the fused element-wise
kernels (``kernels/fused.py``'s ``load_module``). A few filters share one pass, so each input
load feeds several sums. A second pass copies the OW valid columns of each wide row into the
output, applying the epilogue (scale, shift, activation) on the way.

**Data gradient.** At stride 1, the data gradient is the correlation of the output gradient,
zero-padded to ``(H + (KH-1)*DH, W + (KW-1)*DW)``, with the kernels turned by 180 degrees,
summed over the filters: the same wide rows, with one sum per input channel over the taps
of a group of filters, added into the wide row group after group.

Each output is summed in one fixed order whatever the thread count, so the bits never vary.
The images are split between numba's threads (``prange``, one padded image and wide-row
scratch per thread).
"""
import hashlib
import threading

import numpy as np
from numba import njit, uint64

from .. import fused as _fused
from ..scalar_nn import ACT_RELU, activation_value
from .conv import _dummy, run_parts
from .jit import task_count

__all__ = ["direct_conv_fits", "direct_conv_forward", "direct_conv_backward_data"]

# Input channels of a direct convolution at most (a channel adds KH*KW taps to every sum; with
# more channels the patch-row layout's product runs near the BLAS peak anyway)
DIRECT_MAX_CHANNELS = 4
# The passes' shapes, measured on LeNet's conv1 and a ResNet stem (2-core Zen 4, AVX-512):
# forward: (filters per pass, streams, weights hoisted out of the loop). Each tap's loads feed
# 4 filters x 3 streams = 12 sums held in registers: 86-94 GFLOP/s against 51-56 with one
# stream (the sums wait on the add latency) and 30-50 with 16 or more sums (LLVM then stops
# vectorising: too many run-time overlap checks between the stored runs, or spills).
FORWARD_CONFIG = (4, 3, False)
# data gradient: (streams, weights hoisted); one filter per pass, its weights held in registers
# (each output-gradient load feeds the C sums of one tap)
BACKWARD_CONFIG = (4, True)


def direct_conv_fits(x5, g, groups, dtype, what="forward"):
    """Whether the direct kernels take this convolution (``what``: "forward" or "data", the
    data gradient): float32 or float64, ungrouped, 1-D or 2-D, stride 1, at most
    DIRECT_MAX_CHANNELS input channels (x5 the data's 5-D shape, g the geometry tuple of
    kernels/cpu/conv.py). The data gradient of a one-channel image stays with the column
    layout: each output-gradient load then feeds a single multiply-add and the pass runs at
    the loads' speed (LeNet's conv1: 54 GFLOP/s against 78 for the BLAS product)."""
    KD, SD, SH, SW = g[0], g[3], g[4], g[5]
    channels = x5[1]
    return (np.dtype(dtype) in (np.float32, np.float64) and groups == 1 and x5[2] == 1
            and KD == 1 and SD == 1 and SH == 1 and SW == 1
            and 1 <= channels <= DIRECT_MAX_CHANNELS and (what == "forward" or channels >= 2))


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
def compact(wide, w0, WP, out, o0, OH, OW, s, b, mode, act, accumulate):
    """out plane (OH, OW) at o0 (+)= the first OW columns of the wide rows at w0 (WP apart),
    times s plus b (mode 2; mode 1: plus b; mode 0: as they are), then the activation ``act``
    (-1: none; writes only; the wide rows are changed in place). The epilogue runs over the
    wide rows as one long run: a loop over one short output row would vectorise badly (24
    columns: one vector and 8 single elements)."""
    if mode > 0 or act >= 0:
        if mode == 1:
            s = out.dtype.type(1)
        length = uint64((OH - 1) * WP + OW)
        base = uint64(w0)
        if act < 0:
            for c in range(length):
                wide[base + c] = wide[base + c] * s + b
        elif act == ACT_RELU:
            for c in range(length):
                v = wide[base + c] * s + b
                wide[base + c] = v if v > 0 else out.dtype.type(0)
        else:
            for c in range(length):
                wide[base + c] = activation_value(wide[base + c] * s + b, act)
    for r in range(OH):
        src = uint64(w0 + r * WP)
        dst = uint64(o0 + r * OW)
        if accumulate:
            for c in range(uint64(OW)):
                out[dst + c] += wide[src + c]
        else:
            for c in range(uint64(OW)):
                out[dst + c] = wide[src + c]


# ---------------------------------------------------------------------------------------------
# Generated source
# ---------------------------------------------------------------------------------------------
def _streams(count, streams):
    """(run length, start of each run): ``streams`` runs covering [0, count), the last one
    moved back to end at count (it recomputes a few positions; the same values)."""
    streams = max(1, min(streams, count))
    run = -(-count // streams)
    return run, [min(j * run, count - run) for j in range(streams)]


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


def forward_source(C, KH, KW, DH, DW, HP, WP):
    """The generated forward module of one geometry and padded image size (HP, WP)."""
    nf, streams, hoist = FORWARD_CONFIG
    OH, OW = HP - (KH - 1) * DH, WP - (KW - 1) * DW
    count = (OH - 1) * WP + OW
    run, starts = _streams(count, streams)
    T = C * KH * KW
    taps = [("x", c * HP * WP + kh * DH * WP + kw * DW)
            for c in range(C) for kh in range(KH) for kw in range(KW)]
    sums = [[(t, i * T + t) for t in range(T)] for i in range(nf)]
    hoisted, body = _tap_major(
        taps, starts, sums, hoist,
        lambda i, j, acc: "wide[wb + p + uint64(%d)] = %s" % (i * count + starts[j], acc))
    lines = _header("forward: %d channels, kernel %dx%d, dilation %dx%d, padded image %dx%d"
                    % (C, KH, KW, DH, DW, HP, WP))
    lines += _pass("_forward", "x, xb, w, wo, wide, wb",
                   [("xb", "xb"), ("wo", "wo"), ("wb", "wb")], hoisted, body, run)
    lines.append("WIDE = %d  # wide-row elements per filter" % count)
    lines.append(_FORWARD_DRIVER.format(C=C, T=T, HP=HP, WP=WP, OH=OH, OW=OW, count=count,
                                        nf=nf))
    return "\n".join(lines) + "\n"


def backward_source(C, KH, KW, DH, DW, H, W):
    """The generated data-gradient module of one geometry and image size (H, W)."""
    streams, hoist = BACKWARD_CONFIG
    HQ, WQ = H + (KH - 1) * DH, W + (KW - 1) * DW
    # streams that never overlap (the passes after the first add into the wide rows): the
    # rows are rounded up to whole streams, read from the scratch's tail slack
    run = -(-((H - 1) * WQ + W) // streams)
    count = run * streams
    starts = [j * run for j in range(streams)]
    K = KH * KW
    taps = [("dy", (KH - 1 - kh) * DH * WQ + (KW - 1 - kw) * DW)
            for kh in range(KH) for kw in range(KW)]
    sums = [[(k, c * K + k) for k in range(K)] for c in range(C)]
    lines = _header("data gradient: %d channels, kernel %dx%d, dilation %dx%d, image %dx%d"
                    % (C, KH, KW, DH, DW, H, W))
    for op in ("=", "+="):
        hoisted, body = _tap_major(
            taps, starts, sums, hoist,
            lambda c, j, acc, op=op: "wide[wb + p + uint64(%d)] %s %s" % (
                c * count + starts[j], op, acc))
        lines += _pass("_backward_" + ("write" if op == "=" else "add"),
                       "dy, db, w, wo, wide, wb", [("db", "db"), ("wo", "wo"), ("wb", "wb")],
                       hoisted, body, run) + [""]
    lines.append("WIDE = %d  # wide-row elements per channel" % count)
    lines.append(_BACKWARD_DRIVER.format(C=C, K=K, H=H, W=W, HQ=HQ, WQ=WQ, top=(KH - 1) * DH,
                                         left=(KW - 1) * DW, count=count))
    return "\n".join(lines) + "\n"


def _header(title):
    return ["# direct convolution, " + title,
            # the module's helpers are compiled into these kernels: an edit of them must
            # make a new file (numba's disk cache does not follow calls into other files)
            "# helpers %s" % _helpers_digest(),
            "from numba import njit, uint64",
            "from %s import place, compact" % __name__,
            "_FAST = {'contract'}", ""]


# The drivers: images [n0, n1) with the scratch of part ``part`` (one part per thread).
# forward: w holds the weights (F', C*KH*KW) with F' rounded up to whole passes (zeros after F)
_FORWARD_DRIVER = """
@njit(cache=_CACHE, nogil=True)
def forward_images(x, H, W, F, PH, PW, w, y, xp, wide, part, n0, n1, scale, shift, mode, act):
    padded = PH > 0 or PW > 0
    xb = part * {C} * {HP} * {WP}
    wb = part * {nf} * {count}
    one = y.dtype.type(1)
    zero = y.dtype.type(0)
    for img in range(n0, n1):
        if padded:
            for c in range({C}):
                place(x, (img * {C} + c) * H * W, H, W, xp, xb + c * {HP} * {WP}, {HP}, {WP},
                      PH, PW)
            src = xp
            base = xb
        else:
            src = x
            base = img * {C} * H * W
        for f in range(0, F, {nf}):
            _forward(src, base, w, f * {T}, wide, wb)
            for i in range(min({nf}, F - f)):
                s = scale[f + i] if mode == 2 else one
                b = shift[f + i] if mode >= 1 else zero
                compact(wide, wb + i * {count}, {WP}, y, (img * F + f + i) * {OH} * {OW}, {OH},
                        {OW}, s, b, mode, act, False)
"""

_BACKWARD_DRIVER = """
@njit(cache=_CACHE, nogil=True)
def backward_images(dy, F, OH, OW, PH, PW, w, dx, dyp, wide, part, n0, n1, accumulate):
    db = part * F * {HQ} * {WQ}
    wb = part * {C} * {count}
    one = dx.dtype.type(1)
    zero = dx.dtype.type(0)
    for img in range(n0, n1):
        for f in range(F):
            place(dy, (img * F + f) * OH * OW, OH, OW, dyp, db + f * {HQ} * {WQ}, {HQ}, {WQ},
                  {top} - PH, {left} - PW)
        _backward_write(dyp, db, w, 0, wide, wb)
        for f in range(1, F):
            _backward_add(dyp, db + f * {HQ} * {WQ}, w, f * {C} * {K}, wide, wb)
        for c in range({C}):
            compact(wide, wb + c * {count}, {WQ}, dx, (img * {C} + c) * {H} * {W}, {H}, {W},
                    one, zero, 0, -1, accumulate)
"""


def _helpers_digest():
    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


_modules = {}
_modules_lock = threading.Lock()


def _module(kind, *key):
    """The compiled module of ``forward_source`` / ``backward_source`` (``kind``) of key."""
    mod = _modules.get((kind,) + key)
    if mod is None:
        with _modules_lock:
            mod = _modules.get((kind,) + key)
            if mod is None:
                make = forward_source if kind == "forward" else backward_source
                mod = _modules[(kind,) + key] = _fused.load_module("conv_direct", make(*key))
    return mod


# ---------------------------------------------------------------------------------------------
# Launchers
# ---------------------------------------------------------------------------------------------
def _geometry(x5, g):
    """(C, KH, KW, DH, DW), (H, W), (PH, PW) of a direct convolution."""
    KH, KW, PH, PW, DH, DW = g[1], g[2], g[7], g[8], g[10], g[11]
    return (x5[1], KH, KW, DH, DW), (x5[3], x5[4]), (PH, PW)


def _split(run, n, parts):
    """run(part, n0, n1) for ``parts`` slices of n images at once (the threads of
    kernels/cpu/conv.py's run_parts; every kernel releases the GIL)."""
    run_parts(lambda part: run(part, part * n // parts, (part + 1) * n // parts), parts)


def direct_conv_forward(x, w, y, x5, g, scale=None, shift=None, act=-1, work=None):
    """y (n, F, OH, OW) = act(conv(x, w) * scale[f] + shift[f]) for a convolution that
    ``direct_conv_fits`` (x5 its data's 5-D shape, g the geometry); scale / shift may be None.
    ``work`` (a dict, the node's state) keeps the scratch between calls. False (nothing
    done) unless every array is C-contiguous of y's dtype."""
    if not _plain(y.dtype, x, w, y, scale, shift):
        return False
    geo, (H, W), (PH, PW) = _geometry(x5, g)
    HP, WP = H + 2 * PH, W + 2 * PW
    mod = _module("forward", *geo, HP, WP)
    n, F = x5[0], w.shape[0]
    C, KH, KW = geo[:3]
    OH, OW = g[13], g[14]
    nf = FORWARD_CONFIG[0]
    parts = task_count(n * F * OH * OW * C * KH * KW, n)
    xp = _scratch(work, "direct_xp", parts * C * HP * WP if (PH or PW) else 1, y.dtype)
    wide = _scratch(work, "direct_wide", parts * nf * mod.WIDE, y.dtype)
    # the weights in whole passes of nf filters (the last one's missing filters are zero)
    wpad = _scratch(work, "direct_w", -(-F // nf) * nf * C * KH * KW, y.dtype)
    wpad[:w.size] = w.reshape(-1)
    mode = 2 if scale is not None else (1 if shift is not None else 0)
    dummy = _dummy(y.dtype)
    scale = dummy if scale is None else scale.reshape(-1)
    shift = dummy if shift is None else shift.reshape(-1)
    flat_x, flat_y = x.reshape(-1), y.reshape(-1)

    def run(part, n0, n1):
        mod.forward_images(flat_x, H, W, F, PH, PW, wpad, flat_y, xp, wide, part, n0, n1,
                           scale, shift, mode, act)

    _split(run, n, parts)
    return True


def direct_conv_backward_data(dy, w, dx, x5, g, accumulate=False, work=None):
    """dx (n, C, H, W) = (or +=) the data gradient of direct_conv_forward from dy (n, F, OH,
    OW); False (nothing done) unless every array is C-contiguous of dx's dtype."""
    if not _plain(dx.dtype, dy, w, dx):
        return False
    geo, (H, W), (PH, PW) = _geometry(x5, g)
    mod = _module("backward", *geo, H, W)
    n, F = x5[0], w.shape[0]
    C, KH, KW, DH, DW = geo
    HQ, WQ = H + (KH - 1) * DH, W + (KW - 1) * DW
    OH, OW = g[13], g[14]
    parts = task_count(n * F * H * W * C * KH * KW, n)
    # the last stream reads up to a stream's length past the padded planes (those sums are
    # discarded; the slack is zero so they stay finite)
    dyp = _scratch(work, "direct_dyp", parts * F * HQ * WQ + mod.WIDE, dx.dtype)
    wide = _scratch(work, "direct_dwide", parts * C * mod.WIDE, dx.dtype)
    flat_dy, flat_w, flat_dx = dy.reshape(-1), w.reshape(-1), dx.reshape(-1)

    def run(part, n0, n1):
        mod.backward_images(flat_dy, F, OH, OW, PH, PW, flat_w, flat_dx, dyp, wide, part, n0,
                            n1, accumulate)

    _split(run, n, parts)
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


def _plain(dtype, *arrays):
    return all(a is None or (a.dtype == dtype and a.flags.c_contiguous) for a in arrays)


def _scratch(work, key, size, dtype):
    buf = None if work is None else work.get(key)
    if buf is None or buf.size != size or buf.dtype != dtype:
        buf = np.zeros(size, dtype)
        if work is not None:
            work[key] = buf
    return buf
