"""CPU kernels for Pooling (max / avg / sum / lp over 1-D, 2-D and 3-D windows) and the other
spatial resampling operators (UpSampling nearest, Pad, Crop).

Arrays come flattened to planes: ``x (P, D*H*W)`` and ``y (P, OD*OH*OW)`` with P = batch *
channels; ``dims = (D, H, W, OD, OH, OW)`` and ``geo = (KD, KH, KW, SD, SH, SW, PD, PH, PW)``
(1-D and 2-D pooling use leading ones). Planes are independent, so the parallel launchers split
them across threads. Max pooling records the flat input index of each maximum (``mask``) during
training so the backward pass is a scatter instead of a second search.
"""
import numpy as np
from numba import njit, prange

from ..scalar_conv import (POOL_MAX, POOL_AVG, POOL_SUM, POOL_LP, pool_window, lp_power,
                           lp_root, lp_grad_factor, pool_count, PAD_CONSTANT, PAD_EDGE, PAD_REFLECT,
                           pad_source)

__all__ = ["pool_forward", "pool_backward", "POOL_TYPES", "PAD_MODES", "pad_forward",
           "pad_backward", "upsample_nearest", "upsample_nearest_backward"]

POOL_TYPES = {"max": POOL_MAX, "avg": POOL_AVG, "sum": POOL_SUM, "lp": POOL_LP}
PAD_MODES = {"constant": PAD_CONSTANT, "edge": PAD_EDGE, "reflect": PAD_REFLECT}
PARALLEL_MIN = 1 << 14
_NO_MASK = np.zeros((1, 1), dtype=np.int32)


@njit(cache=True)
def _pool_plane(x, y, mask, q, dims, geo, ptype, include_pad, pval, save_mask, lowest):
    D, H, W, OD, OH, OW = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW = geo
    for od in range(OD):
        d0, d1, dl = pool_window(od, SD, PD, KD, D)
        for oh in range(OH):
            h0, h1, hl = pool_window(oh, SH, PH, KH, H)
            for ow in range(OW):
                w0, w1, wl = pool_window(ow, SW, PW, KW, W)
                o = (od * OH + oh) * OW + ow
                if ptype == POOL_MAX:
                    best = lowest
                    arg = -1
                    for d in range(d0, d1):
                        for h in range(h0, h1):
                            base = (d * H + h) * W
                            for w in range(w0, w1):
                                v = x[q, base + w]
                                if v > best or (arg < 0 and v == best):
                                    best = v
                                    arg = base + w
                    y[q, o] = best
                    if save_mask:
                        mask[q, o] = arg
                else:
                    s = 0.0
                    for d in range(d0, d1):
                        for h in range(h0, h1):
                            base = (d * H + h) * W
                            for w in range(w0, w1):
                                if ptype == POOL_LP:
                                    s += lp_power(x[q, base + w], pval)
                                else:
                                    s += x[q, base + w]
                    if ptype == POOL_AVG:
                        count = pool_count(d0, d1, dl, h0, h1, hl, w0, w1, wl, include_pad)
                        # a 'full'-convention window past the data averages to 0, like MXNet
                        s = s / count if count > 0 else 0.0
                    elif ptype == POOL_LP:
                        s = lp_root(s, pval)
                    y[q, o] = s


@njit(cache=True)
def _pool_serial(x, y, mask, dims, geo, ptype, include_pad, pval, save_mask, lowest):
    for q in range(x.shape[0]):
        _pool_plane(x, y, mask, q, dims, geo, ptype, include_pad, pval, save_mask, lowest)


@njit(cache=True, parallel=True)
def _pool_parallel(x, y, mask, dims, geo, ptype, include_pad, pval, save_mask, lowest):
    for q in prange(x.shape[0]):
        _pool_plane(x, y, mask, q, dims, geo, ptype, include_pad, pval, save_mask, lowest)


def pool_forward(x, y, mask, dims, geo, ptype, include_pad, pval):
    """y = pool(x); mask (same shape as y, int32) receives argmax indices when not None."""
    save_mask = mask is not None
    if not save_mask:
        mask = _NO_MASK
    lowest = x.dtype.type(np.finfo(x.dtype).min)
    args = (x, y, mask, dims, geo, ptype, include_pad, pval, save_mask, lowest)
    if x.size >= PARALLEL_MIN and x.shape[0] > 1:
        _pool_parallel(*args)
    else:
        _pool_serial(*args)


@njit(cache=True)
def _unpool_plane(x, y, dy, dx, mask, q, dims, geo, ptype, include_pad, pval, use_mask,
                  accumulate):
    D, H, W, OD, OH, OW = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW = geo
    if not accumulate:
        for i in range(dx.shape[1]):
            dx[q, i] = 0
    for od in range(OD):
        d0, d1, dl = pool_window(od, SD, PD, KD, D)
        for oh in range(OH):
            h0, h1, hl = pool_window(oh, SH, PH, KH, H)
            for ow in range(OW):
                w0, w1, wl = pool_window(ow, SW, PW, KW, W)
                o = (od * OH + oh) * OW + ow
                g = dy[q, o]
                if ptype == POOL_MAX:
                    if use_mask:
                        arg = mask[q, o]
                    else:
                        # like MXNet: the first element equal to the pooled value
                        arg = -1
                        target = y[q, o]
                        for d in range(d0, d1):
                            for h in range(h0, h1):
                                base = (d * H + h) * W
                                for w in range(w0, w1):
                                    if arg < 0 and x[q, base + w] == target:
                                        arg = base + w
                    if arg >= 0:
                        dx[q, arg] += g
                    continue
                if ptype == POOL_AVG:
                    count = pool_count(d0, d1, dl, h0, h1, hl, w0, w1, wl, include_pad)
                    if count <= 0:
                        continue
                    g = g / count
                for d in range(d0, d1):
                    for h in range(h0, h1):
                        base = (d * H + h) * W
                        for w in range(w0, w1):
                            if ptype == POOL_LP:
                                dx[q, base + w] += g * lp_grad_factor(x[q, base + w], y[q, o],
                                                                      pval)
                            else:
                                dx[q, base + w] += g


@njit(cache=True)
def _unpool_serial(x, y, dy, dx, mask, dims, geo, ptype, include_pad, pval, use_mask,
                   accumulate):
    for q in range(x.shape[0]):
        _unpool_plane(x, y, dy, dx, mask, q, dims, geo, ptype, include_pad, pval, use_mask,
                      accumulate)


@njit(cache=True, parallel=True)
def _unpool_parallel(x, y, dy, dx, mask, dims, geo, ptype, include_pad, pval, use_mask,
                     accumulate):
    for q in prange(x.shape[0]):
        _unpool_plane(x, y, dy, dx, mask, q, dims, geo, ptype, include_pad, pval, use_mask,
                      accumulate)


def pool_backward(x, y, dy, dx, mask, dims, geo, ptype, include_pad, pval, accumulate=False):
    """dx (+)= gradient of pooling; max pooling uses mask when given, else searches x == y."""
    use_mask = mask is not None
    if not use_mask:
        mask = _NO_MASK
    args = (x, y, dy, dx, mask, dims, geo, ptype, include_pad, pval, use_mask, accumulate)
    if x.size >= PARALLEL_MIN and x.shape[0] > 1:
        _unpool_parallel(*args)
    else:
        _unpool_serial(*args)


# ---------------------------------------------------------------------------------------------
# Pad (and Crop, its adjoint): planes x (P, D, H, W) -> y (P, OD, OH, OW), before = pads in
# front of each spatial axis.
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
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
                if accumulate:
                    y[q, od, oh, ow] += v
                else:
                    y[q, od, oh, ow] = v


@njit(cache=True)
def _pad_serial(x, y, before, mode, value, accumulate):
    for q in range(x.shape[0]):
        _pad_plane(x, y, before, mode, value, accumulate, q)


@njit(cache=True, parallel=True)
def _pad_parallel(x, y, before, mode, value, accumulate):
    for q in prange(x.shape[0]):
        _pad_plane(x, y, before, mode, value, accumulate, q)


def pad_forward(x, y, before, mode, value=0.0, accumulate=False):
    """y (+)= x padded (mode from PAD_MODES; value fills constant padding)."""
    args = (x, y, before, mode, y.dtype.type(value), accumulate)
    if y.size >= PARALLEL_MIN and x.shape[0] > 1:
        _pad_parallel(*args)
    else:
        _pad_serial(*args)


@njit(cache=True)
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


@njit(cache=True)
def _unpad_serial(dy, dx, before, mode, accumulate):
    for q in range(dx.shape[0]):
        _unpad_plane(dy, dx, before, mode, accumulate, q)


@njit(cache=True, parallel=True)
def _unpad_parallel(dy, dx, before, mode, accumulate):
    for q in prange(dx.shape[0]):
        _unpad_plane(dy, dx, before, mode, accumulate, q)


def pad_backward(dy, dx, before, mode, accumulate=False):
    """dx (+)= the sum of dy over the padded positions reading each element (Crop's forward)."""
    args = (dy, dx, before, mode, accumulate)
    if dy.size >= PARALLEL_MIN and dx.shape[0] > 1:
        _unpad_parallel(*args)
    else:
        _unpad_serial(*args)


# ---------------------------------------------------------------------------------------------
# UpSampling (nearest): x (N, C, H, W) -> channels [c0, c0 + C) of y (N, Ctot, H*s, W*s)
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _upsample_plane(x, y, c0, scale, accumulate, q):
    N, C, H, W = x.shape
    n = q // C
    c = q % C
    for oh in range(y.shape[2]):
        h = oh // scale
        for ow in range(y.shape[3]):
            v = x[n, c, h, ow // scale]
            if accumulate:
                y[n, c0 + c, oh, ow] += v
            else:
                y[n, c0 + c, oh, ow] = v


@njit(cache=True)
def _upsample_serial(x, y, c0, scale, accumulate):
    for q in range(x.shape[0] * x.shape[1]):
        _upsample_plane(x, y, c0, scale, accumulate, q)


@njit(cache=True, parallel=True)
def _upsample_parallel(x, y, c0, scale, accumulate):
    for q in prange(x.shape[0] * x.shape[1]):
        _upsample_plane(x, y, c0, scale, accumulate, q)


def upsample_nearest(x, y, c0, scale, accumulate=False):
    """y[:, c0:c0+C] (+)= x repeated scale times along H and W."""
    args = (x, y, int(c0), int(scale), accumulate)
    if y.size >= PARALLEL_MIN and x.shape[0] * x.shape[1] > 1:
        _upsample_parallel(*args)
    else:
        _upsample_serial(*args)


@njit(cache=True)
def _downsum_plane(dy, dx, c0, scale, accumulate, q):
    N, C, H, W = dx.shape
    n = q // C
    c = q % C
    for h in range(H):
        for w in range(W):
            s = 0.0
            for i in range(scale):
                for j in range(scale):
                    s += dy[n, c0 + c, h * scale + i, w * scale + j]
            if accumulate:
                dx[n, c, h, w] += s
            else:
                dx[n, c, h, w] = s


@njit(cache=True)
def _downsum_serial(dy, dx, c0, scale, accumulate):
    for q in range(dx.shape[0] * dx.shape[1]):
        _downsum_plane(dy, dx, c0, scale, accumulate, q)


@njit(cache=True, parallel=True)
def _downsum_parallel(dy, dx, c0, scale, accumulate):
    for q in prange(dx.shape[0] * dx.shape[1]):
        _downsum_plane(dy, dx, c0, scale, accumulate, q)


def upsample_nearest_backward(dy, dx, c0, scale, accumulate=False):
    """dx (+)= the sum of each scale x scale block of dy[:, c0:c0+C]."""
    args = (dy, dx, int(c0), int(scale), accumulate)
    if dy.size >= PARALLEL_MIN and dx.shape[0] * dx.shape[1] > 1:
        _downsum_parallel(*args)
    else:
        _downsum_serial(*args)
