"""CUDA kernels for Convolution / Deconvolution: the functions and signatures of
``kernels/cpu/conv.py`` (same column layout, same geometry tuple ``g``), as grid-stride kernels.

im2col runs one thread per column-matrix element; col2im *gathers* (one thread per image
element summing the column entries whose windows cover it), so it needs no atomics and sums in
a fixed order. The row layout (im2row / row2im) is the same pair of kernels over channel-last
data. Matrix products use the tiled shared-memory GEMM of ``kernels/cuda/nn.py``; per-channel
sums (the bias gradient) use one block per channel with a shared-memory tree; every layout move
and epilogue is one strided-copy kernel.
"""
from numba import cuda, float64

from ..scalar_conv import conv_output_at, image_index, patch_extents, patch_index
from ..scalar_index import unravel3, unravel4, unravel5
from ..scalar_nn import ACT_RELU, activation_value
from ..scalar_norm import REQ_ADD, accumulate_req, bn_fold_channel, store_req
from .memory import flat, launch_config
from .nn import _SHARED, REDUCE_THREADS, _block_reduce, _gemm

__all__ = ["conv_gemm", "im2col",
           "col2im", "rows_to_batch", "batch_to_rows", "channel_sum", "add_channel_bias",
           "transpose_planes", "im2row", "row2im", "rows_to_nchw", "affine_act_rows", "bn_fold"]

# the request store of scalar_norm compiled as a device function from its Python source (the
# simulator cannot pass its arrays to the njit-compiled one)
_store = cuda.jit(device=True)(store_req.py_func)


def conv_gemm(a, b, out, trans_a=False, trans_b=False):
    """out = op(a) @ op(b) (op transposes when asked)."""
    _gemm(a, b, out, trans_a, trans_b, False)


# ---------------------------------------------------------------------------------------------
# Patches: im2col / col2im over channel-first data and the column matrix (C*K, n*O); im2row /
# row2im over channel-last data and the row matrix (n*O, K*C) (see scalar_conv.patch_index)
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _im2patch_k(x, out, dims, g, channel_last):
    nb, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    K, NO = patch_extents(dims, g)
    for j in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        if channel_last:
            q, p, c = unravel3(j, K, C)
        else:
            c, p, q = unravel3(j, K, NO)
        n, od, oh, ow = unravel4(q, OD, OH, OW)
        kd, kh, kw = unravel3(p, KH, KW)
        idd = od * SD - PD + kd * DD
        ih = oh * SH - PH + kh * DH
        iw = ow * SW - PW + kw * DW
        if 0 <= idd < D and 0 <= ih < H and 0 <= iw < W:
            out[j] = x[image_index(n, c, idd, ih, iw, C, D, H, W, channel_last)]
        else:
            out[j] = 0


@cuda.jit
def _patch2im_k(patches, x, dims, g, channel_last, req):
    nb, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    K, NO = patch_extents(dims, g)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        if channel_last:
            n, idd, ih, iw, c = unravel5(i, D, H, W, C)
        else:
            n, c, idd, ih, iw = unravel5(i, C, D, H, W)
        s = 0.0
        for kd in range(KD):
            od = conv_output_at(idd, kd, SD, PD, DD, OD)
            if od < 0:
                continue
            for kh in range(KH):
                oh = conv_output_at(ih, kh, SH, PH, DH, OH)
                if oh < 0:
                    continue
                for kw in range(KW):
                    ow = conv_output_at(iw, kw, SW, PW, DW, OW)
                    if ow < 0:
                        continue
                    q = ((n * OD + od) * OH + oh) * OW + ow
                    s += patches[patch_index(c, (kd * KH + kh) * KW + kw, q, C, K, NO,
                                             channel_last)]
        _store(x, i, s, req)


def im2col(x, col, g):
    """Fill col (C*K, n*O) from x (n, C, D, H, W) for geometry g."""
    c = flat(col)
    _im2patch_k[launch_config(c.size)](flat(x), c, tuple(x.shape), g, False)


def col2im(col, x, g, accumulate=False):
    """x (n, C, D, H, W) = (or +=) the sum of col's entries over the windows covering each pixel."""
    xf = flat(x)
    _patch2im_k[launch_config(xf.size)](flat(col), xf, tuple(x.shape), g, False,
                                        accumulate_req(accumulate))


def im2row(xt, rows, dims, g):
    """Fill rows (n*O, KD*KH*KW*C) from channel-last data xt (n, D, H, W, C); ``dims`` is the
    channel-first shape (n, C, D, H, W)."""
    rf = flat(rows)
    _im2patch_k[launch_config(rf.size)](flat(xt), rf, tuple(dims), g, True)


def row2im(rows, xt, dims, g):
    """xt (n, D, H, W, C) += the patch rows summed over overlapping windows (gathered per
    element: no atomics, a fixed order)."""
    xf = flat(xt)
    _patch2im_k[launch_config(xf.size)](flat(rows), xf, tuple(dims), g, True, REQ_ADD)


# ---------------------------------------------------------------------------------------------
# Layout moves and epilogues: dst (A, B, C) (+)= src read through strides, with the epilogue of
# channel b; the functions of kernels/cpu/conv.py's layout moves, one thread per element written
# ---------------------------------------------------------------------------------------------
@cuda.jit(device=True)
def _epilogue(v, b, scale, shift, mode, act):
    """act(v * scale[b] + shift[b]) with the scale used when mode == 2 and the shift when
    mode >= 1 (act -1: none)."""
    if mode == 2:
        v = v * scale[b]
    if mode >= 1:
        v = v + shift[b]
    if act == ACT_RELU:
        return v if v > 0 else 0.0
    if act >= 0:
        return activation_value(v, act)
    return v


@cuda.jit
def _relayout_k(src, dst, dims, strides, scale, shift, mode, act, accumulate):
    """dst[a, b, c] = _epilogue(src[a*sa + b*sb + c*sc]) (src may be dst: each thread reads
    only the element it writes); accumulating adds the shifted value (no scale, no act)."""
    _, B, C = dims
    sa, sb, sc = strides
    for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
        a, b, c = unravel3(i, B, C)
        v = src[a * sa + b * sb + c * sc]
        if accumulate:
            dst[i] += _epilogue(v, b, scale, shift, mode, -1)
        else:
            dst[i] = _epilogue(v, b, scale, shift, mode, act)


def _relayout(src, dst, dims, strides, scale=None, shift=None, act=-1, accumulate=False):
    """dst viewed as dims (+)= src through strides, then per channel (dims' middle axis)
    scaled, shifted and activated; scale / shift None are left out."""
    df = flat(dst)
    mode = 2 if scale is not None else (1 if shift is not None else 0)
    _relayout_k[launch_config(df.size)](flat(src), df, tuple(dims), strides,
                                        df if scale is None else flat(scale),
                                        df if shift is None else flat(shift), mode, act,
                                        accumulate)


def rows_to_batch(rows, out, bias=None, accumulate=False, scale=None, act=-1):
    """out (n, F, O) = (or +=) rows (F, n*O) rearranged, plus bias[f] when bias is given; a
    write may also scale each channel first and apply an activation (code, -1 for none)."""
    if accumulate and (scale is not None or act >= 0):
        raise ValueError("rows_to_batch: scale and activation apply to writes only")
    nb, F, O = out.shape
    _relayout(rows, out, out.shape, (O, nb * O, 1), scale, bias, act, accumulate)


def batch_to_rows(src, rows, db=None, db_accumulate=False):
    """rows (F, n*O) = src (n, F, O) rearranged; when db is given also db[f] (+)= the sum of
    channel f."""
    nb, F, O = src.shape
    _relayout(src, rows, (F, nb, O), (O, F * O, 1))
    if db is not None:
        channel_sum(src, db, accumulate=db_accumulate)


def add_channel_bias(out, bias):
    """out (n, F, O) += bias[f]."""
    nb, F, O = out.shape
    _relayout(out, out, out.shape, (F * O, O, 1), shift=bias)


def transpose_planes(src, dst, accumulate=False):
    """dst (m, B, A) = (or +=) src (m, A, B) with its last two axes swapped."""
    m, A, B = src.shape
    _relayout(src, dst, (m, B, A), (A * B, 1, B), accumulate=accumulate)


def rows_to_nchw(res, out, scale=None, shift=None, act=-1):
    """out (n, F, O) = act(res (n*O, F) * scale[f] + shift[f])."""
    nb, F, O = out.shape
    _relayout(res, out, out.shape, (O * F, 1, F), scale, shift, act)


def affine_act_rows(out, scale=None, shift=None, act=-1):
    """In place on out (N, F): out = act(out * scale[f] + shift[f])."""
    N, F = out.shape
    _relayout(out, out, (N, F, 1), (F, 1, 0), scale, shift, act)


# ---------------------------------------------------------------------------------------------
# Per-channel sums and BatchNorm folding
# ---------------------------------------------------------------------------------------------
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
    _channel_sum_k[max(1, min(F, 1024)), REDUCE_THREADS](flat(src), tuple(src.shape), out,
                                                         accumulate)


@cuda.jit
def _bn_fold_k(gamma, beta, mean, var, bias, scale, shift, eps, fix_gamma, has_bias):
    for f in range(cuda.grid(1), scale.size, cuda.gridsize(1)):
        s, b = bn_fold_channel(1.0 if fix_gamma else gamma[f], beta[f], mean[f], var[f],
                               bias[f] if has_bias else 0.0, eps)
        scale[f] = s
        shift[f] = b


def bn_fold(gamma, beta, mean, var, bias, scale, shift, eps, fix_gamma):
    """Per-channel scale and shift with BN(y + bias) = y * scale + shift (moving statistics)."""
    has_bias = bias is not None
    _bn_fold_k[launch_config(scale.size)](gamma, beta, mean, var,
                                          flat(bias) if has_bias else scale, scale, shift,
                                          float(eps), bool(fix_gamma), has_bias)
