"""CUDA kernels for Convolution / Deconvolution: the functions and signatures of
``kernels/cpu/conv.py`` (same column layout, same geometry tuple ``g``), as grid-stride kernels.

im2col runs one thread per column-matrix element; col2im *gathers* (one thread per image
element summing the column entries whose windows cover it), so it needs no atomics and sums in
a fixed order. Matrix products use the tiled shared-memory GEMM of ``kernels/cuda/nn.py``;
per-channel sums (the bias gradient) use one block per channel with a shared-memory tree.
"""
import math

from numba import cuda, float64

from ..scalar_nn import ACT_RELU, activation_value
from .memory import launch_config
from .nn import _SHARED, REDUCE_THREADS, _block_reduce, _gemm

__all__ = ["conv_gemm", "im2col",
           "col2im", "rows_to_batch", "batch_to_rows", "channel_sum", "add_channel_bias",
           "transpose_planes", "im2row", "row2im", "rows_to_nchw", "affine_act_rows", "bn_fold"]


def _flat(a):
    return a.reshape(a.size)


def conv_gemm(a, b, out, trans_a=False, trans_b=False):
    """out = op(a) @ op(b) (op transposes when asked)."""
    _gemm(a, b, out, trans_a, trans_b, False)


# ---------------------------------------------------------------------------------------------
# im2col / col2im
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _im2col_k(x, col, dims, g):
    nb, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    O = OD * OH * OW
    width = nb * O
    for j in range(cuda.grid(1), col.size, cuda.gridsize(1)):
        r = j // width
        q = j - r * width
        n = q // O
        o = q - n * O
        ow = o % OW
        t = o // OW
        oh = t % OH
        od = t // OH
        kw = r % KW
        t = r // KW
        kh = t % KH
        t = t // KH
        kd = t % KD
        c = t // KD
        idd = od * SD - PD + kd * DD
        ih = oh * SH - PH + kh * DH
        iw = ow * SW - PW + kw * DW
        if 0 <= idd < D and 0 <= ih < H and 0 <= iw < W:
            col[j] = x[(((n * C + c) * D + idd) * H + ih) * W + iw]
        else:
            col[j] = 0


def im2col(x, col, g):
    """Fill col (C*K, n*O) from x (n, C, D, H, W) for geometry g."""
    c = _flat(col)
    _im2col_k[launch_config(c.size)](_flat(x), c, tuple(x.shape), g)


@cuda.jit
def _col2im_k(col, x, dims, g, accumulate):
    nb, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    O = OD * OH * OW
    width = nb * O
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        iw = i % W
        t = i // W
        ih = t % H
        t = t // H
        idd = t % D
        t = t // D
        c = t % C
        n = t // C
        s = 0.0
        for kd in range(KD):
            td = idd + PD - kd * DD
            if td < 0 or td % SD != 0 or td // SD >= OD:
                continue
            od = td // SD
            for kh in range(KH):
                th = ih + PH - kh * DH
                if th < 0 or th % SH != 0 or th // SH >= OH:
                    continue
                oh = th // SH
                for kw in range(KW):
                    tw = iw + PW - kw * DW
                    if tw < 0 or tw % SW != 0 or tw // SW >= OW:
                        continue
                    ow = tw // SW
                    r = ((c * KD + kd) * KH + kh) * KW + kw
                    s += col[r * width + n * O + (od * OH + oh) * OW + ow]
        if accumulate:
            x[i] += s
        else:
            x[i] = s


def col2im(col, x, g, accumulate=False):
    """x (n, C, D, H, W) = (or +=) the sum of col's entries over the windows covering each pixel."""
    xf = _flat(x)
    _col2im_k[launch_config(xf.size)](_flat(col), xf, tuple(x.shape), g, accumulate)


# ---------------------------------------------------------------------------------------------
# Layout moves and bias
# ---------------------------------------------------------------------------------------------
@cuda.jit(device=True)
def _epilogue(v, s, b, mode, act):
    """act(v * s + b) with the scale used when mode == 2 and the shift when mode >= 1."""
    if mode == 2:
        v = v * s
    if mode >= 1:
        v = v + b
    if act == ACT_RELU:
        return v if v > 0 else 0.0
    if act >= 0:
        return activation_value(v, act)
    return v


@cuda.jit
def _rows_to_batch_k(rows, out, dims, scale, shift, mode, act, accumulate):
    nb, F, O = dims
    width = nb * O
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        o = i % O
        t = i // O
        f = t % F
        n = t // F
        v = rows[f * width + n * O + o]
        if accumulate:
            if mode >= 1:
                v += shift[f]
            out[i] += v
        else:
            out[i] = _epilogue(v, scale[f] if mode == 2 else 1.0,
                               shift[f] if mode >= 1 else 0.0, mode, act)


def _epilogue_args(out, scale, shift):
    mode = 2 if scale is not None else (1 if shift is not None else 0)
    return (out if scale is None else scale, out if shift is None else shift, mode)


def rows_to_batch(rows, out, bias=None, accumulate=False, scale=None, act=-1):
    """out (n, F, O) = (or +=) rows (F, n*O) rearranged, plus bias[f] when bias is given; a
    write may also scale each channel first and apply an activation (code, -1 for none)."""
    if accumulate and (scale is not None or act >= 0):
        raise ValueError("rows_to_batch: scale and activation apply to writes only")
    of = _flat(out)
    scale, bias, mode = _epilogue_args(of, scale, bias)
    _rows_to_batch_k[launch_config(of.size)](_flat(rows), of, tuple(out.shape), _flat(scale),
                                              _flat(bias), mode, act, accumulate)


@cuda.jit
def _batch_to_rows_k(src, rows, dims):
    nb, F, O = dims
    width = nb * O
    for i in range(cuda.grid(1), src.size, cuda.gridsize(1)):
        o = i % O
        t = i // O
        f = t % F
        n = t // F
        rows[f * width + n * O + o] = src[i]


@cuda.jit
def _channel_sum_k(src, dims, out, accumulate):
    part = cuda.shared.array(_SHARED, float64)
    nb, F, O = dims
    tid = cuda.threadIdx.x
    for f in range(cuda.blockIdx.x, F, cuda.gridDim.x):
        s = 0.0
        for j in range(tid, nb * O, cuda.blockDim.x):
            n = j // O
            s += src[(n * F + f) * O + j - n * O]
        total = _block_reduce(part, s, False)
        if tid == 0:
            if accumulate:
                out[f] += total
            else:
                out[f] = total


def channel_sum(src, out, accumulate=False):
    """out[f] (+)= sum over n, o of src (n, F, O) — the bias gradient."""
    F = src.shape[1]
    _channel_sum_k[max(1, min(F, 1024)), REDUCE_THREADS](_flat(src), tuple(src.shape), out,
                                                         accumulate)


def batch_to_rows(src, rows, db=None, db_accumulate=False):
    """rows (F, n*O) = src (n, F, O) rearranged; when db is given also db[f] (+)= the sum of
    channel f."""
    sf = _flat(src)
    _batch_to_rows_k[launch_config(sf.size)](sf, _flat(rows), tuple(src.shape))
    if db is not None:
        channel_sum(src, db, accumulate=db_accumulate)


@cuda.jit
def _add_channel_bias_k(out, dims, bias):
    nb, F, O = dims
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] += bias[(i // O) % F]


def add_channel_bias(out, bias):
    """out (n, F, O) += bias[f]."""
    of = _flat(out)
    _add_channel_bias_k[launch_config(of.size)](of, tuple(out.shape), bias)


# ---------------------------------------------------------------------------------------------
# The row layout (patches of channel-last data, one row per output pixel) and the epilogues:
# the functions of kernels/cpu/conv.py's second half, one thread per element written.
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _transpose_planes_k(src, dst, dims, accumulate):
    _, A, B = dims
    for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
        a = i % A
        t = i // A
        b = t % B
        q = t // B
        v = src[(q * A + a) * B + b]
        if accumulate:
            dst[i] += v
        else:
            dst[i] = v


def transpose_planes(src, dst, accumulate=False):
    """dst (m, B, A) = (or +=) src (m, A, B) with its last two axes swapped."""
    df = _flat(dst)
    _transpose_planes_k[launch_config(df.size)](_flat(src), df, tuple(src.shape), accumulate)


@cuda.jit
def _im2row_k(xt, rows, dims, g):
    nb, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    width = KD * KH * KW * C
    O = OD * OH * OW
    for j in range(cuda.grid(1), rows.size, cuda.gridsize(1)):
        q = j // width
        r = j - q * width
        c = r % C
        t = r // C
        kw = t % KW
        t = t // KW
        kh = t % KH
        kd = t // KH
        n = q // O
        o = q - n * O
        ow = o % OW
        t = o // OW
        oh = t % OH
        od = t // OH
        idd = od * SD - PD + kd * DD
        ih = oh * SH - PH + kh * DH
        iw = ow * SW - PW + kw * DW
        if 0 <= idd < D and 0 <= ih < H and 0 <= iw < W:
            rows[j] = xt[(((n * D + idd) * H + ih) * W + iw) * C + c]
        else:
            rows[j] = 0


def im2row(xt, rows, dims, g):
    """Fill rows (n*O, KD*KH*KW*C) from channel-last data xt (n, D, H, W, C); ``dims`` is the
    channel-first shape (n, C, D, H, W)."""
    rf = _flat(rows)
    _im2row_k[launch_config(rf.size)](_flat(xt), rf, tuple(dims), g)


@cuda.jit
def _row2im_k(rows, xt, dims, g):
    nb, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    width = KD * KH * KW * C
    O = OD * OH * OW
    for i in range(cuda.grid(1), xt.size, cuda.gridsize(1)):
        c = i % C
        t = i // C
        iw = t % W
        t = t // W
        ih = t % H
        t = t // H
        idd = t % D
        n = t // D
        s = 0.0
        for kd in range(KD):
            td = idd + PD - kd * DD
            if td < 0 or td % SD != 0 or td // SD >= OD:
                continue
            od = td // SD
            for kh in range(KH):
                th = ih + PH - kh * DH
                if th < 0 or th % SH != 0 or th // SH >= OH:
                    continue
                oh = th // SH
                for kw in range(KW):
                    tw = iw + PW - kw * DW
                    if tw < 0 or tw % SW != 0 or tw // SW >= OW:
                        continue
                    ow = tw // SW
                    q = n * O + (od * OH + oh) * OW + ow
                    s += rows[q * width + ((kd * KH + kh) * KW + kw) * C + c]
        xt[i] += s


def row2im(rows, xt, dims, g):
    """xt (n, D, H, W, C) += the patch rows summed over overlapping windows (gathered per
    element: no atomics, a fixed order)."""
    xf = _flat(xt)
    _row2im_k[launch_config(xf.size)](_flat(rows), xf, tuple(dims), g)


@cuda.jit
def _rows_to_nchw_k(res, out, dims, scale, shift, mode, act):
    nb, F, O = dims
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        o = i % O
        t = i // O
        f = t % F
        n = t // F
        out[i] = _epilogue(res[(n * O + o) * F + f], scale[f] if mode == 2 else 1.0,
                           shift[f] if mode >= 1 else 0.0, mode, act)


def rows_to_nchw(res, out, scale=None, shift=None, act=-1):
    """out (n, F, O) = act(res (n*O, F) * scale[f] + shift[f])."""
    of = _flat(out)
    scale, shift, mode = _epilogue_args(of, scale, shift)
    _rows_to_nchw_k[launch_config(of.size)](_flat(res), of, tuple(out.shape), _flat(scale),
                                             _flat(shift), mode, act)


@cuda.jit
def _affine_act_rows_k(out, F, scale, shift, mode, act):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        f = i % F
        out[i] = _epilogue(out[i], scale[f] if mode == 2 else 1.0,
                           shift[f] if mode >= 1 else 0.0, mode, act)


def affine_act_rows(out, scale=None, shift=None, act=-1):
    """In place on out (N, F): out = act(out * scale[f] + shift[f])."""
    of = _flat(out)
    scale, shift, mode = _epilogue_args(of, scale, shift)
    _affine_act_rows_k[launch_config(of.size)](of, out.shape[1], _flat(scale), _flat(shift),
                                                mode, act)


@cuda.jit
def _bn_fold_k(gamma, beta, mean, var, bias, scale, shift, eps, fix_gamma, has_bias):
    for f in range(cuda.grid(1), scale.size, cuda.gridsize(1)):
        g = 1.0 if fix_gamma else gamma[f]
        s = g / math.sqrt(var[f] + eps)
        b = bias[f] if has_bias else 0.0
        scale[f] = s
        shift[f] = beta[f] + (b - mean[f]) * s


def bn_fold(gamma, beta, mean, var, bias, scale, shift, eps, fix_gamma):
    """Per-channel scale and shift with BN(y + bias) = y * scale + shift (moving statistics)."""
    has_bias = bias is not None
    _bn_fold_k[launch_config(scale.size)](gamma, beta, mean, var,
                                          _flat(bias) if has_bias else scale, scale, shift,
                                          float(eps), bool(fix_gamma), has_bias)
