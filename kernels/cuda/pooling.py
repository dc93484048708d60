"""CUDA kernels for Pooling, Pad/Crop and UpSampling (nearest): the functions and signatures
of ``kernels/cpu/pooling.py``, over the window math of ``kernels/scalar_conv.py``.

Forward kernels run one thread per output element. Backward kernels of pooling and padding
scatter with atomic adds (a window's inputs overlap other windows'), UpSampling's backward
gathers each input's block. Max pooling always records the argmax mask when given one.
"""
import numpy as np
from numba import cuda

from ..scalar_conv import (
    PAD_CONSTANT,
    PAD_EDGE,
    PAD_REFLECT,
    POOL_AVG,
    POOL_LP,
    POOL_MAX,
    POOL_SUM,
    lp_grad_factor,
    lp_power,
    lp_root,
    pad_source,
    pool_count,
    pool_window,
)
from .memory import launch_config

__all__ = ["pool_forward", "pool_backward", "POOL_TYPES", "PAD_MODES", "pad_forward",
           "pad_backward", "upsample_nearest", "upsample_nearest_backward"]

POOL_TYPES = {"max": POOL_MAX, "avg": POOL_AVG, "sum": POOL_SUM, "lp": POOL_LP}
PAD_MODES = {"constant": PAD_CONSTANT, "edge": PAD_EDGE, "reflect": PAD_REFLECT}


def _flat(a):
    return a.reshape(a.size)


@cuda.jit
def _zero_k(dst):
    for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
        dst[i] = 0


def _zero(dst):
    _zero_k[launch_config(dst.size)](dst)


# ---------------------------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _pool_k(x, y, mask, dims, geo, ptype, include_pad, pval, save_mask, lowest):
    D, H, W, OD, OH, OW = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW = geo
    S = D * H * W
    SO = OD * OH * OW
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        q = i // SO
        o = i - q * SO
        ow = o % OW
        t = o // OW
        oh = t % OH
        od = t // OH
        d0, d1, dl = pool_window(od, SD, PD, KD, D)
        h0, h1, hl = pool_window(oh, SH, PH, KH, H)
        w0, w1, wl = pool_window(ow, SW, PW, KW, W)
        xb = q * S
        if ptype == POOL_MAX:
            best = lowest
            arg = -1
            for d in range(d0, d1):
                for h in range(h0, h1):
                    for w in range(w0, w1):
                        v = x[xb + (d * H + h) * W + w]
                        if v > best or (arg < 0 and v == best):
                            best = v
                            arg = (d * H + h) * W + w
            y[i] = best
            if save_mask:
                mask[i] = arg
        else:
            s = 0.0
            for d in range(d0, d1):
                for h in range(h0, h1):
                    for w in range(w0, w1):
                        v = x[xb + (d * H + h) * W + w]
                        if ptype == POOL_LP:
                            s += lp_power(v, pval)
                        else:
                            s += v
            if ptype == POOL_AVG:
                count = pool_count(d0, d1, dl, h0, h1, hl, w0, w1, wl, include_pad)
                s = s / count if count > 0 else 0.0
            elif ptype == POOL_LP:
                s = lp_root(s, pval)
            y[i] = s


def pool_forward(x, y, mask, dims, geo, ptype, include_pad, pval):
    """y (P, OD*OH*OW) = pool(x (P, D*H*W)); returns True when mask received the argmaxes."""
    save_mask = mask is not None and ptype == POOL_MAX
    yf = _flat(y)
    lowest = np.finfo(np.dtype(x.dtype)).min
    _pool_k[launch_config(yf.size)](_flat(x), yf, _flat(mask) if save_mask else yf, dims, geo,
                                     ptype, include_pad, pval, save_mask, lowest)
    return save_mask


@cuda.jit
def _unpool_k(x, y, dy, dx, mask, dims, geo, ptype, include_pad, pval, use_mask):
    D, H, W, OD, OH, OW = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW = geo
    S = D * H * W
    SO = OD * OH * OW
    for i in range(cuda.grid(1), dy.size, cuda.gridsize(1)):
        q = i // SO
        o = i - q * SO
        ow = o % OW
        t = o // OW
        oh = t % OH
        od = t // OH
        d0, d1, dl = pool_window(od, SD, PD, KD, D)
        h0, h1, hl = pool_window(oh, SH, PH, KH, H)
        w0, w1, wl = pool_window(ow, SW, PW, KW, W)
        xb = q * S
        g = dy[i]
        if ptype == POOL_MAX:
            if use_mask:
                arg = mask[i]
            else:
                arg = -1
                for d in range(d0, d1):
                    for h in range(h0, h1):
                        for w in range(w0, w1):
                            j = (d * H + h) * W + w
                            if arg < 0 and x[xb + j] == y[i]:
                                arg = j
            if arg >= 0:
                cuda.atomic.add(dx, xb + arg, g)
            continue
        if ptype == POOL_AVG:
            count = pool_count(d0, d1, dl, h0, h1, hl, w0, w1, wl, include_pad)
            if count <= 0:
                continue
            g = g / count
        for d in range(d0, d1):
            for h in range(h0, h1):
                for w in range(w0, w1):
                    j = xb + (d * H + h) * W + w
                    if ptype == POOL_LP:
                        cuda.atomic.add(dx, j, g * lp_grad_factor(x[j], y[i], pval))
                    else:
                        cuda.atomic.add(dx, j, g)


def pool_backward(x, y, dy, dx, mask, dims, geo, ptype, include_pad, pval, accumulate=False):
    """dx (+)= gradient of pooling; max pooling uses mask when given, else searches x == y."""
    dxf = _flat(dx)
    if not accumulate:
        _zero(dxf)
    use_mask = mask is not None
    dyf = _flat(dy)
    _unpool_k[launch_config(dyf.size)](_flat(x), _flat(y), dyf, dxf,
                                       _flat(mask) if use_mask else dyf, dims, geo, ptype,
                                       include_pad, pval, use_mask)


# ---------------------------------------------------------------------------------------------
# Pad (and Crop, its adjoint): planes x (P, D, H, W) -> y (P, OD, OH, OW)
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _pad_k(x, y, xdims, ydims, before, mode, value, accumulate):
    P, D, H, W = xdims
    _, OD, OH, OW = ydims
    bd, bh, bw = before
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        ow = i % OW
        t = i // OW
        oh = t % OH
        t = t // OH
        od = t % OD
        q = t // OD
        sd = pad_source(od, bd, D, mode)
        sh = pad_source(oh, bh, H, mode)
        sw = pad_source(ow, bw, W, mode)
        if sd < 0 or sh < 0 or sw < 0:
            v = value
        else:
            v = x[((q * D + sd) * H + sh) * W + sw]
        if accumulate:
            y[i] += v
        else:
            y[i] = v


def pad_forward(x, y, before, mode, value=0.0, accumulate=False):
    """y (+)= x padded (mode from PAD_MODES; value fills constant padding)."""
    yf = _flat(y)
    _pad_k[launch_config(yf.size)](_flat(x), yf, tuple(x.shape), tuple(y.shape), tuple(before),
                                   mode, value, accumulate)


@cuda.jit
def _unpad_k(dy, dx, xdims, ydims, before, mode):
    P, D, H, W = xdims
    _, OD, OH, OW = ydims
    bd, bh, bw = before
    for i in range(cuda.grid(1), dy.size, cuda.gridsize(1)):
        ow = i % OW
        t = i // OW
        oh = t % OH
        t = t // OH
        od = t % OD
        q = t // OD
        sd = pad_source(od, bd, D, mode)
        sh = pad_source(oh, bh, H, mode)
        sw = pad_source(ow, bw, W, mode)
        if sd >= 0 and sh >= 0 and sw >= 0:
            cuda.atomic.add(dx, ((q * D + sd) * H + sh) * W + sw, dy[i])


def pad_backward(dy, dx, before, mode, accumulate=False):
    """dx (+)= the sum of dy over the padded positions reading each element (Crop's forward)."""
    dxf = _flat(dx)
    if not accumulate:
        _zero(dxf)
    dyf = _flat(dy)
    _unpad_k[launch_config(dyf.size)](dyf, dxf, tuple(dx.shape), tuple(dy.shape), tuple(before),
                                      mode)


# ---------------------------------------------------------------------------------------------
# UpSampling (nearest)
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _upsample_k(x, y, xdims, ydims, c0, scale, accumulate):
    N, C, H, W = xdims
    _, CT, OH, OW = ydims
    for i in range(cuda.grid(1), N * C * OH * OW, cuda.gridsize(1)):
        ow = i % OW
        t = i // OW
        oh = t % OH
        t = t // OH
        c = t % C
        n = t // C
        v = x[((n * C + c) * H + oh // scale) * W + ow // scale]
        j = ((n * CT + c0 + c) * OH + oh) * OW + ow
        if accumulate:
            y[j] += v
        else:
            y[j] = v


def upsample_nearest(x, y, c0, scale, accumulate=False):
    """y[:, c0:c0+C] (+)= x repeated scale times along H and W."""
    n = x.shape[0] * x.shape[1] * y.shape[2] * y.shape[3]
    _upsample_k[launch_config(n)](_flat(x), _flat(y), tuple(x.shape), tuple(y.shape), int(c0),
                                  int(scale), accumulate)


@cuda.jit
def _downsum_k(dy, dx, xdims, ydims, c0, scale, accumulate):
    N, C, H, W = xdims
    _, CT, OH, OW = ydims
    for i in range(cuda.grid(1), dx.size, cuda.gridsize(1)):
        w = i % W
        t = i // W
        h = t % H
        t = t // H
        c = t % C
        n = t // C
        s = 0.0
        for a in range(scale):
            for b in range(scale):
                s += dy[((n * CT + c0 + c) * OH + h * scale + a) * OW + w * scale + b]
        if accumulate:
            dx[i] += s
        else:
            dx[i] = s


def upsample_nearest_backward(dy, dx, c0, scale, accumulate=False):
    """dx (+)= the sum of each scale x scale block of dy[:, c0:c0+C]."""
    dxf = _flat(dx)
    _downsum_k[launch_config(dxf.size)](_flat(dy), dxf, tuple(dx.shape), tuple(dy.shape),
                                        int(c0), int(scale), accumulate)
