"""CUDA kernels for Pooling, Pad/Crop and UpSampling (nearest): the functions and signatures
of ``kernels/cpu/pooling.py``, over the window math of ``kernels/scalar_conv.py``.

Forward kernels run one thread per output element. Backward kernels of pooling and padding
scatter with atomic adds (a window's inputs overlap other windows'), UpSampling's backward
gathers each input's block. Max pooling always records the argmax mask when given one.
"""
import numpy as np
from numba import cuda

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
    pool_output_window,
)
from ..scalar_index import unravel4
from ..scalar_norm import REQ_WRITE, accumulate_req, store_req
from .memory import flat, launch_config

__all__ = ["pool_forward", "pool_backward", "POOL_TYPES", "PAD_MODES", "pad_forward",
           "pad_backward", "upsample_nearest", "upsample_nearest_backward"]

# the request store of scalar_norm compiled as a device function from its Python source (the
# simulator cannot pass its arrays to the njit-compiled one)
_store = cuda.jit(device=True)(store_req.py_func)


@cuda.jit
def _zero_k(dst):
    for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
        dst[i] = 0


def _zero(dst):
    _zero_k[launch_config(dst.size)](dst)


# ---------------------------------------------------------------------------------------------
# Pooling: planes x (P, D*H*W) -> y (P, OD*OH*OW); a window is (d0, d1, h0, h1, w0, w1) from
# scalar_conv.pool_output_window, its offsets relative to the plane's first element xb
# ---------------------------------------------------------------------------------------------
@cuda.jit(device=True)
def _window_pool(x, xb, H, W, win, count, ptype, pval, lowest):
    """(pooled value, offset of the first maximum: -1 for the other types)."""
    d0, d1, h0, h1, w0, w1 = win
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
        return best, arg
    s = 0.0
    for d in range(d0, d1):
        for h in range(h0, h1):
            for w in range(w0, w1):
                v = x[xb + (d * H + h) * W + w]
                s += lp_power(v, pval) if ptype == POOL_LP else v
    if ptype == POOL_AVG:
        s = s / count if count > 0 else 0.0
    elif ptype == POOL_LP:
        s = lp_root(s, pval)
    return s, -1


@cuda.jit(device=True)
def _window_first_equal(x, xb, H, W, win, target):
    """Offset of the window's first element equal to target (MXNet's max-pooling gradient
    rule when no mask was recorded), or -1."""
    d0, d1, h0, h1, w0, w1 = win
    for d in range(d0, d1):
        for h in range(h0, h1):
            for w in range(w0, w1):
                if x[xb + (d * H + h) * W + w] == target:
                    return (d * H + h) * W + w
    return -1


@cuda.jit
def _pool_k(x, y, mask, dims, geo, ptype, include_pad, pval, save_mask, lowest):
    D, H, W, OD, OH, OW = dims
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        q, od, oh, ow = unravel4(i, OD, OH, OW)
        win, count = pool_output_window(od, oh, ow, dims, geo, include_pad)
        v, arg = _window_pool(x, q * D * H * W, H, W, win, count, ptype, pval, lowest)
        y[i] = v
        if save_mask:
            mask[i] = arg


def pool_forward(x, y, mask, dims, geo, ptype, include_pad, pval):
    """y (P, OD*OH*OW) = pool(x (P, D*H*W)); returns True when mask received the argmaxes."""
    save_mask = mask is not None and ptype == POOL_MAX
    yf = flat(y)
    lowest = np.finfo(np.dtype(x.dtype)).min
    _pool_k[launch_config(yf.size)](flat(x), yf, flat(mask) if save_mask else yf, dims, geo,
                                     ptype, include_pad, pval, save_mask, lowest)
    return save_mask


@cuda.jit
def _unpool_k(x, y, dy, dx, mask, dims, geo, ptype, include_pad, pval, use_mask):
    D, H, W, OD, OH, OW = dims
    for i in range(cuda.grid(1), dy.size, cuda.gridsize(1)):
        q, od, oh, ow = unravel4(i, OD, OH, OW)
        win, count = pool_output_window(od, oh, ow, dims, geo, include_pad)
        xb = q * D * H * W
        if ptype == POOL_MAX:
            arg = mask[i] if use_mask else _window_first_equal(x, xb, H, W, win, y[i])
            if arg >= 0:
                cuda.atomic.add(dx, xb + arg, dy[i])
            continue
        if ptype == POOL_AVG and count <= 0:
            continue
        g = dy[i] / count if ptype == POOL_AVG else dy[i]
        d0, d1, h0, h1, w0, w1 = win
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
    dxf = flat(dx)
    if not accumulate:
        _zero(dxf)
    use_mask = mask is not None
    dyf = flat(dy)
    _unpool_k[launch_config(dyf.size)](flat(x), flat(y), dyf, dxf,
                                       flat(mask) if use_mask else dyf, dims, geo, ptype,
                                       include_pad, pval, use_mask)


# ---------------------------------------------------------------------------------------------
# Pad (and Crop, its adjoint): planes x (P, D, H, W) -> y (P, OD, OH, OW)
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _pad_k(x, y, xdims, ydims, before, mode, value, req, adjoint):
    """One thread per padded element y[i]: y[i] (req)= the element of x it reads (value for
    constant padding); the adjoint adds y[i] to that element of x instead (atomically: edge
    and reflect padding read an element several times)."""
    P, D, H, W = xdims
    _, OD, OH, OW = ydims
    bd, bh, bw = before
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        q, od, oh, ow = unravel4(i, OD, OH, OW)
        sd = pad_source(od, bd, D, mode)
        sh = pad_source(oh, bh, H, mode)
        sw = pad_source(ow, bw, W, mode)
        inside = sd >= 0 and sh >= 0 and sw >= 0
        j = ((q * D + sd) * H + sh) * W + sw
        if adjoint:
            if inside:
                cuda.atomic.add(x, j, y[i])
        else:
            _store(y, i, x[j] if inside else value, req)


def pad_forward(x, y, before, mode, value=0.0, accumulate=False):
    """y (+)= x padded (mode from PAD_MODES; value fills constant padding)."""
    yf = flat(y)
    _pad_k[launch_config(yf.size)](flat(x), yf, tuple(x.shape), tuple(y.shape), tuple(before),
                                   mode, value, accumulate_req(accumulate), False)


def pad_backward(dy, dx, before, mode, accumulate=False):
    """dx (+)= the sum of dy over the padded positions reading each element (Crop's forward)."""
    dxf = flat(dx)
    if not accumulate:
        _zero(dxf)
    dyf = flat(dy)
    _pad_k[launch_config(dyf.size)](dxf, dyf, tuple(dx.shape), tuple(dy.shape), tuple(before),
                                    mode, 0.0, REQ_WRITE, True)


# ---------------------------------------------------------------------------------------------
# UpSampling (nearest): x (N, C, H, W) -> channels [c0, c0 + C) of y (N, Ctot, H*s, W*s)
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _nearest_k(small, big, sdims, bdims, c0, scale, req, to_big):
    """to_big: one thread per element of channels [c0, c0 + C) of big, which (req)= the
    element of small it repeats; else one thread per element of small, which (req)= the sum
    of its scale x scale block of big."""
    N, C, H, W = sdims
    _, CT, OH, OW = bdims
    rows, cols = (OH, OW) if to_big else (H, W)
    for i in range(cuda.grid(1), N * C * rows * cols, cuda.gridsize(1)):
        n, c, r, k = unravel4(i, C, rows, cols)
        if to_big:
            v = small[((n * C + c) * H + r // scale) * W + k // scale]
            _store(big, ((n * CT + c0 + c) * OH + r) * OW + k, v, req)
        else:
            s = 0.0
            for a in range(scale):
                for b in range(scale):
                    s += big[((n * CT + c0 + c) * OH + r * scale + a) * OW + k * scale + b]
            _store(small, i, s, req)


def _nearest(small, big, c0, scale, accumulate, to_big):
    n = small.shape[0] * small.shape[1] * (big.shape[2] * big.shape[3] if to_big else
                                           small.shape[2] * small.shape[3])
    _nearest_k[launch_config(n)](flat(small), flat(big), tuple(small.shape), tuple(big.shape),
                                 int(c0), int(scale), accumulate_req(accumulate), to_big)


def upsample_nearest(x, y, c0, scale, accumulate=False):
    """y[:, c0:c0+C] (+)= x repeated scale times along H and W."""
    _nearest(x, y, c0, scale, accumulate, True)


def upsample_nearest_backward(dy, dx, c0, scale, accumulate=False):
    """dx (+)= the sum of each scale x scale block of dy[:, c0:c0+C]."""
    _nearest(dx, dy, c0, scale, accumulate, False)
