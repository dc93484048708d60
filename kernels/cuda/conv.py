"""CUDA kernels for Convolution / Deconvolution: the functions and signatures of
``kernels/cpu/conv.py`` (same column layout, same geometry tuple ``g``), as grid-stride kernels.

im2col runs one thread per column-matrix element; col2im *gathers* (one thread per image
element summing the column entries whose windows cover it), so it needs no atomics and sums in
a fixed order. Matrix products use the tiled shared-memory GEMM of ``kernels/cuda/nn.py``;
per-channel sums (the bias gradient) use one block per channel with a shared-memory tree.
"""
from numba import cuda, float64

from .memory import launch_config
from .nn import _SHARED, REDUCE_THREADS, _block_reduce, _gemm

__all__ = ["conv_gemm", "im2col",
           "col2im", "rows_to_batch", "batch_to_rows", "channel_sum", "add_channel_bias"]


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
@cuda.jit
def _rows_to_batch_k(rows, out, dims, bias, has_bias, accumulate):
    nb, F, O = dims
    width = nb * O
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        o = i % O
        t = i // O
        f = t % F
        n = t // F
        v = rows[f * width + n * O + o]
        if has_bias:
            v += bias[f]
        if accumulate:
            out[i] += v
        else:
            out[i] = v


def rows_to_batch(rows, out, bias=None, accumulate=False):
    """out (n, F, O) = (or +=) rows (F, n*O) rearranged, plus bias[f] when bias is given."""
    of = _flat(out)
    has_bias = bias is not None
    _rows_to_batch_k[launch_config(of.size)](_flat(rows), of, tuple(out.shape),
                                              bias if has_bias else of, has_bias, accumulate)


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
