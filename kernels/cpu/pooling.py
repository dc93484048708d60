"""CPU kernels for Pooling (max / avg / sum / lp over 1-D, 2-D and 3-D windows) and the other
spatial resampling operators (UpSampling nearest, Pad, Crop).

Arrays come flattened to planes: ``x (P, D*H*W)`` and ``y (P, OD*OH*OW)`` with P = batch *
channels; ``dims = (D, H, W, OD, OH, OW)`` and ``geo = (KD, KH, KW, SD, SH, SW, PD, PH, PW)``
(1-D and 2-D pooling use leading ones). Planes are independent, so the parallel launchers split
them across threads. Max pooling records the flat input index of each maximum (``mask``) during
training so the backward pass is a scatter instead of a second search.
"""
import numpy as np
from numba import njit, prange, uint64

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from ..scalar_conv import (
    PAD_MODES,
    POOL_AVG,
    POOL_LP,
    POOL_MAX,
    POOL_TYPES,
    lp_grad_factor,
    lp_power,
    lp_root,
    pad_source,
    pool_count,
    pool_window,
)
from .conv import fill_run
from .jit import parallel_loop, task_count

__all__ = ["pool_forward", "pool_backward", "POOL_TYPES", "PAD_MODES", "pad_forward",
           "pad_backward", "upsample_nearest", "upsample_nearest_backward"]

# a window step costs about half an element-wise add (the parallel threshold doubles)
_COST = 0.5
_NO_MASK = np.zeros(1, dtype=np.int32)


@njit(cache=True, nogil=True)
def _pool_plane_full(x, y, q, dims, geo, ptype, pval):
    """Pooling of plane q when every window lies wholly inside the data (no padding or
    clipping): each kernel offset is one strided run over an output row, which vectorises.
    Max pooling keeps no argmax mask here; the backward pass finds the maxima again."""
    D, H, W, OD, OH, OW = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW = geo
    xb = q * D * H * W
    yb = q * OD * OH * OW
    inv = 1.0 / (KD * KH * KW)
    for od in range(OD):
        for oh in range(OH):
            o = uint64(yb + (od * OH + oh) * OW)
            first = True
            for kd in range(KD):
                for kh in range(KH):
                    row = xb + ((od * SD + kd) * H + oh * SH + kh) * W
                    for kw in range(KW):
                        s0 = uint64(row + kw)
                        sw = uint64(SW)
                        if ptype == POOL_MAX:
                            if first:
                                for ow in range(uint64(OW)):
                                    y[o + ow] = x[s0 + ow * sw]
                            else:
                                for ow in range(uint64(OW)):
                                    y[o + ow] = max(y[o + ow], x[s0 + ow * sw])
                        elif ptype == POOL_LP:
                            if first:
                                for ow in range(uint64(OW)):
                                    y[o + ow] = lp_power(x[s0 + ow * sw], pval)
                            else:
                                for ow in range(uint64(OW)):
                                    y[o + ow] += lp_power(x[s0 + ow * sw], pval)
                        else:
                            if first:
                                for ow in range(uint64(OW)):
                                    y[o + ow] = x[s0 + ow * sw]
                            else:
                                for ow in range(uint64(OW)):
                                    y[o + ow] += x[s0 + ow * sw]
                        first = False
            if ptype == POOL_AVG:
                for ow in range(uint64(OW)):
                    y[o + ow] *= inv
            elif ptype == POOL_LP:
                for ow in range(uint64(OW)):
                    y[o + ow] = lp_root(y[o + ow], pval)


@njit(cache=True, nogil=True)
def _pool_plane(x, y, dy, dx, mask, q, dims, geo, ptype, include_pad, pval, save_mask, lowest,
                backward):
    """Plane q in general (windows clipped to the data, padding, 'full' windows): pooling, or
    with ``backward`` its gradient, dx += each window's share of dy."""
    D, H, W, OD, OH, OW = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW = geo
    xb = q * D * H * W
    yb = q * OD * OH * OW
    for od in range(OD):
        d0, d1, dl = pool_window(od, SD, PD, KD, D)
        for oh in range(OH):
            h0, h1, hl = pool_window(oh, SH, PH, KH, H)
            for ow in range(OW):
                w0, w1, wl = pool_window(ow, SW, PW, KW, W)
                o = yb + (od * OH + oh) * OW + ow
                if not backward:
                    if ptype == POOL_MAX:
                        best = lowest
                        arg = -1
                        for d in range(d0, d1):
                            for h in range(h0, h1):
                                base = (d * H + h) * W
                                for w in range(w0, w1):
                                    v = x[xb + base + w]
                                    if v > best or (arg < 0 and v == best):
                                        best = v
                                        arg = base + w
                        y[o] = best
                        if save_mask:
                            mask[o] = arg
                    else:
                        s = 0.0
                        for d in range(d0, d1):
                            for h in range(h0, h1):
                                base = xb + (d * H + h) * W
                                for w in range(w0, w1):
                                    if ptype == POOL_LP:
                                        s += lp_power(x[base + w], pval)
                                    else:
                                        s += x[base + w]
                        if ptype == POOL_AVG:
                            count = pool_count(d0, d1, dl, h0, h1, hl, w0, w1, wl, include_pad)
                            # a 'full'-convention window past the data averages to 0, like MXNet
                            s = s / count if count > 0 else 0.0
                        elif ptype == POOL_LP:
                            s = lp_root(s, pval)
                        y[o] = s
                    continue
                g = dy[o]
                if ptype == POOL_MAX:
                    # like MXNet: the first element equal to the pooled value
                    target = y[o]
                    arg = -1
                    for d in range(d0, d1):
                        for h in range(h0, h1):
                            base = (d * H + h) * W
                            for w in range(w0, w1):
                                if arg < 0 and x[xb + base + w] == target:
                                    arg = base + w
                    if arg >= 0:
                        dx[xb + arg] += g
                    continue
                if ptype == POOL_AVG:
                    count = pool_count(d0, d1, dl, h0, h1, hl, w0, w1, wl, include_pad)
                    if count <= 0:
                        continue
                    g = g / count
                for d in range(d0, d1):
                    for h in range(h0, h1):
                        base = xb + (d * H + h) * W
                        for w in range(w0, w1):
                            if ptype == POOL_LP:
                                dx[base + w] += g * lp_grad_factor(x[base + w], y[o], pval)
                            else:
                                dx[base + w] += g


@njit(cache=True, nogil=True)
def _pool_planes(x, y, mask, dims, geo, ptype, include_pad, pval, save_mask, lowest, full,
                 q0, q1):
    for q in range(q0, q1):
        if full:
            _pool_plane_full(x, y, q, dims, geo, ptype, pval)
        else:
            _pool_plane(x, y, y, x, mask, q, dims, geo, ptype, include_pad, pval, save_mask,
                        lowest, False)


@njit(cache=True, nogil=True, parallel=True)
def _pool_parallel(x, y, mask, dims, geo, ptype, include_pad, pval, save_mask, lowest, full,
                   planes, parts):
    for i in prange(parts):
        _pool_planes(x, y, mask, dims, geo, ptype, include_pad, pval, save_mask, lowest, full,
                     i * planes // parts, (i + 1) * planes // parts)


# ---------------------------------------------------------------------------------------------
# 2x2 windows at stride 2 without padding (LeNet's and most CNNs' pooling), on planes of H x W
# (a 3-D pooling with a depth window and stride of 1 is the same on D times as many planes).
# Each output row reads two input rows as pairs: a loop LLVM vectorises with interleaved
# loads, ~10x the general kernel's speed on 12- and 4-wide outputs. The backward pass finds
# each window's maximum with selects, not branches: which element it is depends on the data
# and mispredicts a branch (measured 5x slower).
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _pool22_planes(x, y, ptype, dims, q0, q1):
    H, W, OH, OW = dims
    two = uint64(2)
    one = uint64(1)
    quarter = y.dtype.type(0.25)
    for q in range(q0, q1):
        xb = uint64(q * H * W)
        yb = uint64(q * OH * OW)
        for oh in range(uint64(OH)):
            r0 = xb + oh * two * uint64(W)
            r1 = r0 + uint64(W)
            o = yb + oh * uint64(OW)
            for ow in range(uint64(OW)):
                i = two * ow
                a = x[r0 + i]
                b = x[r0 + i + one]
                c = x[r1 + i]
                d = x[r1 + i + one]
                if ptype == POOL_MAX:
                    # max() of the general kernel: the later value only when it is larger
                    ab = b if b > a else a
                    abc = c if c > ab else ab
                    y[o + ow] = d if d > abc else abc
                elif ptype == POOL_AVG:
                    y[o + ow] = (((a + b) + c) + d) * quarter
                else:
                    y[o + ow] = ((a + b) + c) + d


@njit(cache=True, nogil=True, parallel=True)
def _pool22_parallel(x, y, ptype, dims, planes, parts):
    for i in prange(parts):
        _pool22_planes(x, y, ptype, dims, i * planes // parts, (i + 1) * planes // parts)


@njit(cache=True, nogil=True)
def _unpool22_max_plane(x, y, dy, dx, xb, yb, H, W, OH, OW, accumulate):
    """A cleared plane (unless accumulating), then each window's gradient at its first
    (row-major) element equal to the maximum, found with selects (measured 2x a write of the
    window's four gradients)."""
    zero = dx.dtype.type(0)
    W_ = uint64(W)
    if not accumulate:
        for p in range(uint64(H * W)):
            dx[xb + p] = zero
    for oh in range(uint64(OH)):
        r0 = xb + oh * uint64(2) * W_
        r1 = r0 + W_
        o = yb + oh * uint64(OW)
        for ow in range(uint64(OW)):
            t = y[o + ow]
            i = uint64(2) * ow
            e0 = x[r0 + i] == t
            e1 = x[r0 + i + uint64(1)] == t
            e2 = x[r1 + i] == t
            e3 = x[r1 + i + uint64(1)] == t
            pos = r1 + i + uint64(1)
            pos = r1 + i if e2 else pos
            pos = r0 + i + uint64(1) if e1 else pos
            pos = r0 + i if e0 else pos
            g = dy[o + ow]      # loaded before the select: a load inside it is a branch
            g = g if (e0 | e1 | e2 | e3) else zero
            if accumulate:
                dx[pos] += g
            else:
                dx[pos] = g


@njit(cache=True, nogil=True)
def _unpool22_planes(x, y, dy, dx, ptype, dims, accumulate, q0, q1):
    H, W, OH, OW = dims
    two = uint64(2)
    one = uint64(1)
    zero = dx.dtype.type(0)
    quarter = dx.dtype.type(0.25)
    for q in range(q0, q1):
        xb = uint64(q * H * W)
        yb = uint64(q * OH * OW)
        if ptype == POOL_MAX:
            _unpool22_max_plane(x, y, dy, dx, xb, yb, H, W, OH, OW, accumulate)
            continue
        if not accumulate:
            # rows and columns no window covers (odd H or W) get no gradient
            for h in range(uint64(2 * OH), uint64(H)):
                fill_run(dx, xb + h * uint64(W), zero, W)
            if W > 2 * OW:
                for h in range(uint64(2 * OH)):
                    fill_run(dx, xb + h * uint64(W) + uint64(2 * OW), zero, W - 2 * OW)
        for oh in range(uint64(OH)):
            r0 = xb + oh * two * uint64(W)
            r1 = r0 + uint64(W)
            o = yb + oh * uint64(OW)
            for ow in range(uint64(OW)):
                i = two * ow
                g = dy[o + ow]
                if ptype == POOL_AVG:
                    g = g * quarter
                if accumulate:
                    dx[r0 + i] += g
                    dx[r0 + i + one] += g
                    dx[r1 + i] += g
                    dx[r1 + i + one] += g
                else:
                    dx[r0 + i] = g
                    dx[r0 + i + one] = g
                    dx[r1 + i] = g
                    dx[r1 + i + one] = g


@njit(cache=True, nogil=True, parallel=True)
def _unpool22_parallel(x, y, dy, dx, ptype, dims, accumulate, planes, parts):
    for i in prange(parts):
        _unpool22_planes(x, y, dy, dx, ptype, dims, accumulate, i * planes // parts,
                         (i + 1) * planes // parts)


def _pairs_dims(dims, geo, ptype):
    """(H, W, OH, OW) when the pooling is 2x2 windows at stride 2 without padding over whole
    H x W planes (see _pool22_planes), else None."""
    D, H, W, OD, OH, OW = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW = geo
    if (ptype != POOL_LP and KD == SD == 1 and PD == PH == PW == 0 and KH == KW == SH == SW == 2
            and OD == D and 2 * OH <= H and 2 * OW <= W):
        return (H, W, OH, OW)
    return None


def _run_planes(serial, parallel, args, planes, work):
    """serial(*args, 0, planes) on this thread, or parallel(*args, planes, parts) splitting the
    planes over task_count's parts."""
    parts = task_count(work, planes, _COST, 8)
    if parts > 1:
        parallel(*args, planes, parts)
    else:
        serial(*args, 0, planes)


def _windows_full(dims, geo):
    """True when no window is clipped: no padding and the last window ends inside the data."""
    D, H, W, OD, OH, OW = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW = geo
    return (PD == PH == PW == 0 and (OD - 1) * SD + KD <= D and (OH - 1) * SH + KH <= H
            and (OW - 1) * SW + KW <= W)


@njit(cache=True, nogil=True)
def _pool_whole_planes(x, y, size, ptype, pval, q0, q1):
    """One window covering each whole plane (global pooling): a contiguous reduction."""
    for q in range(q0, q1):
        base = uint64(q * size)
        if ptype == POOL_MAX:
            best = x[base]
            for i in range(uint64(1), uint64(size)):
                v = x[base + i]
                best = v if v > best else best
            y[q] = best
            continue
        s = 0.0
        if ptype == POOL_LP:
            for i in range(uint64(size)):
                s += lp_power(x[base + i], pval)
            y[q] = lp_root(s, pval)
            continue
        for i in range(uint64(size)):
            s += x[base + i]
        y[q] = s / size if ptype == POOL_AVG else s


@njit(cache=True, nogil=True, parallel=True)
def _pool_whole_planes_parallel(x, y, size, ptype, pval, planes, parts):
    for i in prange(parts):
        _pool_whole_planes(x, y, size, ptype, pval, i * planes // parts,
                           (i + 1) * planes // parts)


def pool_forward(x, y, mask, dims, geo, ptype, include_pad, pval):
    """y (P, OD*OH*OW) = pool(x (P, D*H*W)); mask (int32, y's shape), when given, may receive
    the flat index of each maximum. Returns True when it did (pass it to pool_backward then)."""
    full = _windows_full(dims, geo)
    if full and y.shape[1] == 1 and dims[:3] == geo[:3]:
        # one window over the whole plane (global pooling): max keeps no mask here either
        planes, size = x.shape
        _run_planes(_pool_whole_planes, _pool_whole_planes_parallel,
                    (x.reshape(-1), y.reshape(-1), size, ptype, pval), planes, x.size)
        return False
    pairs = _pairs_dims(dims, geo, ptype)
    if pairs is not None:
        planes = x.shape[0] * dims[0]
        _run_planes(_pool22_planes, _pool22_parallel,
                    (x.reshape(-1), y.reshape(-1), ptype, pairs), planes, x.size)
        return False
    save_mask = mask is not None and not full and ptype == POOL_MAX
    mask = mask.reshape(-1) if save_mask else _NO_MASK
    lowest = x.dtype.type(np.finfo(x.dtype).min)
    args = (x.reshape(-1), y.reshape(-1), mask, dims, geo, ptype, include_pad, pval, save_mask,
            lowest, full)
    _run_planes(_pool_planes, _pool_parallel, args, x.shape[0], x.size)
    return save_mask


@njit(cache=True, nogil=True)
def _unpool_plane_full(y, dy, dx, x, q, dims, geo, ptype, pending):
    """Backward of _pool_plane_full for max / avg / sum: strided runs per kernel offset. Max
    pooling hands each output's gradient to the first input equal to the maximum (MXNet's
    rule) through `pending`, a row of gradients not yet delivered."""
    D, H, W, OD, OH, OW = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW = geo
    xb = q * D * H * W
    yb = q * OD * OH * OW
    scale = dx.dtype.type(1.0 / (KD * KH * KW) if ptype == POOL_AVG else 1.0)
    zero = dx.dtype.type(0)
    sw = uint64(SW)
    for od in range(OD):
        for oh in range(OH):
            o = uint64(yb + (od * OH + oh) * OW)
            if ptype == POOL_MAX:
                for ow in range(uint64(OW)):
                    pending[ow] = dy[o + ow]
            for kd in range(KD):
                for kh in range(KH):
                    row = xb + ((od * SD + kd) * H + oh * SH + kh) * W
                    for kw in range(KW):
                        s0 = uint64(row + kw)
                        if ptype == POOL_MAX:
                            for ow in range(uint64(OW)):
                                i = s0 + ow * sw
                                hit = x[i] == y[o + ow]
                                g = pending[ow]
                                dx[i] += g if hit else zero
                                pending[ow] = zero if hit else g
                        else:
                            for ow in range(uint64(OW)):
                                dx[s0 + ow * sw] += dy[o + ow] * scale


@njit(cache=True, nogil=True)
def _unpool_plane(x, y, dy, dx, mask, q, dims, geo, ptype, include_pad, pval, use_mask, full,
                  pending):
    D, H, W, OD, OH, OW = dims
    xb = q * D * H * W
    yb = q * OD * OH * OW
    if ptype == POOL_MAX and use_mask:
        for o in range(yb, yb + OD * OH * OW):
            arg = mask[o]
            if arg >= 0:
                dx[xb + arg] += dy[o]
        return
    if full and ptype != POOL_LP:
        _unpool_plane_full(y, dy, dx, x, q, dims, geo, ptype, pending)
        return
    _pool_plane(x, y, dy, dx, mask, q, dims, geo, ptype, include_pad, pval, False,
                x.dtype.type(0), True)


@njit(cache=True, nogil=True)
def _unpool_planes(x, y, dy, dx, mask, dims, geo, ptype, include_pad, pval, use_mask, full,
                   accumulate, q0, q1):
    D, H, W, OD, OH, OW = dims
    size = D * H * W
    if not accumulate:
        fill_run(dx, q0 * size, dx.dtype.type(0), (q1 - q0) * size)
    pending = np.empty(OW, dtype=dx.dtype)
    for q in range(q0, q1):
        _unpool_plane(x, y, dy, dx, mask, q, dims, geo, ptype, include_pad, pval, use_mask, full,
                      pending)


@njit(cache=True, nogil=True, parallel=True)
def _unpool_parallel(x, y, dy, dx, mask, dims, geo, ptype, include_pad, pval, use_mask, full,
                     accumulate, planes, parts):
    for i in prange(parts):
        _unpool_planes(x, y, dy, dx, mask, dims, geo, ptype, include_pad, pval, use_mask, full,
                       accumulate, i * planes // parts, (i + 1) * planes // parts)


def pool_backward(x, y, dy, dx, mask, dims, geo, ptype, include_pad, pval, accumulate=False):
    """dx (+)= gradient of pooling; max pooling uses mask when given, else searches x == y."""
    pairs = _pairs_dims(dims, geo, ptype)
    if pairs is not None and mask is None:
        planes = x.shape[0] * dims[0]
        _run_planes(_unpool22_planes, _unpool22_parallel,
                    (x.reshape(-1), y.reshape(-1), dy.reshape(-1), dx.reshape(-1), ptype, pairs,
                     accumulate), planes, x.size)
        return
    use_mask = mask is not None
    mask = mask.reshape(-1) if use_mask else _NO_MASK
    args = (x.reshape(-1), y.reshape(-1), dy.reshape(-1), dx.reshape(-1), mask, dims, geo,
            ptype, include_pad, pval, use_mask, _windows_full(dims, geo), accumulate)
    _run_planes(_unpool_planes, _unpool_parallel, args, x.shape[0], x.size)


# ---------------------------------------------------------------------------------------------
# Pad (and Crop, its adjoint): planes x (P, D, H, W) -> y (P, OD, OH, OW), before = pads in
# front of each spatial axis.
# ---------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _store4(dst, a, b, c, d, value, accumulate):
    """dst[a, b, c, d] += value (accumulate) or = value."""
    if accumulate:
        dst[a, b, c, d] += value
    else:
        dst[a, b, c, d] = value


@njit(cache=True, nogil=True)
def _pad_plane(x, y, before, mode, value, accumulate, q):
    P, D, H, W = x.shape
    _, OD, OH, OW = y.shape
    bd, bh, bw = before
    for od in range(OD):
        sd = pad_source(od, bd, D, mode)
        for oh in range(OH):
            sh = pad_source(oh, bh, H, mode)
            for ow in range(OW):
                sw = pad_source(ow, bw, W, mode)
                if sd < 0 or sh < 0 or sw < 0:
                    v = value
                else:
                    v = x[q, sd, sh, sw]
                _store4(y, q, od, oh, ow, v, accumulate)


@parallel_loop(cost=_COST)
def _pad_planes(x, y, before, mode, value, accumulate):
    for q in prange(x.shape[0]):
        _pad_plane(x, y, before, mode, value, accumulate, q)


def pad_forward(x, y, before, mode, value=0.0, accumulate=False):
    """y (+)= x padded (mode from PAD_MODES; value fills constant padding)."""
    args = (x, y, before, mode, y.dtype.type(value), accumulate)
    _pad_planes(y.size if x.shape[0] > 1 else 0, *args)


@njit(cache=True, nogil=True)
def _unpad_plane(dy, dx, before, mode, accumulate, q):
    P, D, H, W = dx.shape
    _, OD, OH, OW = dy.shape
    bd, bh, bw = before
    if not accumulate:
        for d in range(D):
            for h in range(H):
                for w in range(W):
                    dx[q, d, h, w] = 0
    for od in range(OD):
        sd = pad_source(od, bd, D, mode)
        if sd < 0:
            continue
        for oh in range(OH):
            sh = pad_source(oh, bh, H, mode)
            if sh < 0:
                continue
            for ow in range(OW):
                sw = pad_source(ow, bw, W, mode)
                if sw >= 0:
                    dx[q, sd, sh, sw] += dy[q, od, oh, ow]


@parallel_loop(cost=_COST)
def _unpad_planes(dy, dx, before, mode, accumulate):
    for q in prange(dx.shape[0]):
        _unpad_plane(dy, dx, before, mode, accumulate, q)


def pad_backward(dy, dx, before, mode, accumulate=False):
    """dx (+)= the sum of dy over the padded positions reading each element (Crop's forward)."""
    args = (dy, dx, before, mode, accumulate)
    _unpad_planes(dy.size if dx.shape[0] > 1 else 0, *args)


# ---------------------------------------------------------------------------------------------
# UpSampling (nearest): x (N, C, H, W) -> channels [c0, c0 + C) of y (N, Ctot, H*s, W*s)
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _nearest_plane(small, big, c0, scale, accumulate, to_big, q):
    """Plane q = (n, c) of small (N, C, H, W) against channel c0 + c of big, whose scale x scale
    blocks repeat small's elements: to_big, big (+)= small repeated; else small (+)= the sums
    of big's blocks (the adjoint)."""
    N, C, H, W = small.shape
    n = q // C
    c = q % C
    if to_big:
        for oh in range(big.shape[2]):
            h = oh // scale
            for ow in range(big.shape[3]):
                v = small[n, c, h, ow // scale]
                _store4(big, n, c0 + c, oh, ow, v, accumulate)
        return
    for h in range(H):
        for w in range(W):
            s = 0.0
            for i in range(scale):
                for j in range(scale):
                    s += big[n, c0 + c, h * scale + i, w * scale + j]
            _store4(small, n, c, h, w, s, accumulate)


@parallel_loop(cost=_COST)
def _nearest_planes(small, big, c0, scale, accumulate, to_big):
    for q in prange(small.shape[0] * small.shape[1]):
        _nearest_plane(small, big, c0, scale, accumulate, to_big, q)


def _nearest(small, big, c0, scale, accumulate, to_big):
    args = (small, big, int(c0), int(scale), accumulate, to_big)
    _nearest_planes(big.size if small.shape[0] * small.shape[1] > 1 else 0, *args)


def upsample_nearest(x, y, c0, scale, accumulate=False):
    """y[:, c0:c0+C] (+)= x repeated scale times along H and W."""
    _nearest(x, y, c0, scale, accumulate, True)


def upsample_nearest_backward(dy, dx, c0, scale, accumulate=False):
    """dx (+)= the sum of each scale x scale block of dy[:, c0:c0+C]."""
    _nearest(dx, dy, c0, scale, accumulate, False)
