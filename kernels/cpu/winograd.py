"""Winograd F(2x2, 3x3) convolution of channel-last data (3x3 kernels, stride 1, no dilation).

Each 2x2 block of output pixels (a *tile*) is computed from the 4x4 block of input pixels under
it with 16 multiplications per (input channel, filter) instead of 36:

    Y = A^T [ (G g G^T) * (B^T d B) ] A

(d the 4x4 input block of one channel, g the 3x3 kernel, * element-wise;

    B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],
    A^T = [1 1 1 0; 0 1 -1 -1]).

Summed over the input channels, the element-wise products become 16 matrix products, one per
position xi of the 4x4 transformed block: ``M[xi] (tiles, F) = V[xi] (tiles, C) @ U[xi] (C, F)``
with ``V[xi]`` the transformed input tiles and ``U[xi]`` the transformed kernels, which BLAS
runs at close to its peak. With 2.25x fewer multiplications than the patch-row product it is
~2x faster for the ResNet block's 32->32-channel layers on one core (measured: 16 products of
(512, 32) @ (32, 32) in 2.5-3.3 ms per batch of 32 images vs 7.7 ms for the patch rows (32768,
288) @ (288, 32), before the transforms). Rounding: each output is a few more additions and
subtractions of the same products, well within float32 tolerance of the direct sum.

The input and output transforms work a row of tiles at a time with the channels as the
contiguous axis (channel-last data), the even and odd columns kept apart so that every pass is
one long vectorised loop over the row (see ``_winograd_input``); the output pass applies the
epilogue (per-channel scale and shift, activation) before writing the 2x2 pixels it keeps (an
odd output size drops a row or column of the last tiles). The data gradient of such a layer is
the same kind of convolution (``winograd_weights(..., flip=True)``).
"""
import numpy as np
from numba import njit, uint64

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from ..scalar_nn import ACT_RELU, activation_value
from .conv import _epilogue_args, copy_run, fill_run, run_parts

__all__ = ["winograd_weights", "winograd_conv_last", "winograd_scratch_shapes", "winograd_chunk"]

# transformed-input elements (16 * tiles * C) per chunk of images: 1 MB of float32, so V and M
# stay in the caches between the transform, the 16 products and the output pass (measured on
# the ResNet block: chunks of 512 tiles 2.5 ms of products per batch, 1024-2048 tiles 3.3 ms)
WINOGRAD_BUDGET = 1 << 18

@njit(cache=True, inline="always")
def _g_rows(a, b, c):
    """G (a, b, c) with G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]."""
    return a, (a + b + c) * 0.5, (a - b + c) * 0.5, c


@njit(cache=True, nogil=True)
def _winograd_weights(w, u, flip):
    F, C = w.shape[0], w.shape[1]
    col = np.empty((4, 3))
    for f in range(F):
        for c in range(C):
            # G g: the 3 columns of g, each transformed to 4 rows (in float64); flipped, g is
            # the kernel turned by 180 degrees, from the filters' side
            for j in range(3):
                if flip:
                    r = _g_rows(np.float64(w[f, c, 2, 2 - j]), np.float64(w[f, c, 1, 2 - j]),
                                np.float64(w[f, c, 0, 2 - j]))
                else:
                    r = _g_rows(np.float64(w[f, c, 0, j]), np.float64(w[f, c, 1, j]),
                                np.float64(w[f, c, 2, j]))
                for i in range(4):
                    col[i, j] = r[i]
            # (G g) G^T: each of the 4 rows transformed to 4 columns
            for i in range(4):
                r = _g_rows(col[i, 0], col[i, 1], col[i, 2])
                for j in range(4):
                    if flip:
                        u[4 * i + j, f, c] = r[j]
                    else:
                        u[4 * i + j, c, f] = r[j]


def winograd_weights(w, u, flip=False):
    """u (16, C, F) = the transformed kernels G g G^T of w (F, C, 3, 3), position xi = 4*a + b
    of the 4x4 block first. With ``flip``, u (16, F, C) transforms the kernels of the data
    gradient instead: the 3x3 convolution of the output gradient with w turned by 180 degrees
    and its channel axes swapped (at padding 2 - pad it gives the data's size back)."""
    _winograd_weights(w, u, flip)


def winograd_scratch_shapes(dims, filters, pad, parts, chunk):
    """Shapes of the V and M scratch arrays ``winograd_conv_last`` takes for ``parts`` thread
    parts of ``chunk`` images each: (parts, 16, chunk * tiles, C) and (..., filters)."""
    _, C, H, W = dims
    th, tw = _tiles(H, W, pad)
    tiles = chunk * th * tw
    return (parts, 16, tiles, C), (parts, 16, tiles, filters)


def _tiles(H, W, pad):
    oh = H + 2 * pad[0] - 2
    ow = W + 2 * pad[1] - 2
    return (oh + 1) // 2, (ow + 1) // 2


@njit(cache=True, inline="always")
def _bt_pass(buf, C, s0, s1, s2, s3):
    """In place over c < C: (a, b, c, d) at offsets s0..s3 -> B^T (a, b, c, d)."""
    for c in range(uint64(C)):
        a = buf[s0 + c]
        b = buf[s1 + c]
        e = buf[s2 + c]
        d = buf[s3 + c]
        buf[s0 + c] = a - e
        buf[s1 + c] = b + e
        buf[s2 + c] = e - b
        buf[s3 + c] = b - d


@njit(cache=True, nogil=True)
def _winograd_input(x, v, dims, pad, n0, m):
    """v (16, T, C) = B^T d B of the 4x4 input blocks of images [n0, n0 + m) of channel-last
    x (N, H, W, C), tiles in (image, tile row, tile column) order.

    One row of tiles at a time: its 4 input rows are gathered (zeros over the padding) with the
    even and odd columns apart, ``E_i[k] = x[h0 + i, 2k - pw]``, ``O_i[k] = x[h0 + i, 2k + 1 -
    pw]``; tile k's columns are then E[k], O[k], E[k + 1], O[k + 1], so both passes of B^T
    are long loops over the whole row of tiles ((tiles, C) elements), which vectorise, where a
    tile at a time would be loops of C elements (too short for AVX-512's unrolled loop)."""
    _, H, W, C = dims
    ph, pw = pad
    th_count = (H + 2 * ph - 1) // 2
    tw_count = (W + 2 * pw - 1) // 2
    T = m * th_count * tw_count
    C_ = uint64(C)
    half = (tw_count + 1) * C          # one E or O row
    span = uint64(tw_count * C)        # one row of tiles in V
    buf = np.empty(8 * half, x.dtype)  # rows i = 0..3, E then O
    zero = x.dtype.type(0)
    for n in range(n0, n0 + m):
        for th in range(th_count):
            h0 = 2 * th - ph
            for i in range(4):
                h = h0 + i
                for parity in range(2):
                    row = (2 * i + parity) * half
                    if h < 0 or h >= H:
                        fill_run(buf, row, zero, half)
                        continue
                    for kk in range(tw_count + 1):
                        w = 2 * kk + parity - pw
                        if w < 0 or w >= W:
                            fill_run(buf, row + kk * C, zero, C)
                        else:
                            copy_run(buf, row + kk * C, x, ((n * H + h) * W + w) * C, C)
            for parity in range(2):     # along the rows: B^T d
                _bt_pass(buf, half, uint64(parity * half), uint64((2 + parity) * half),
                         uint64((4 + parity) * half), uint64((6 + parity) * half))
            t0 = ((n - n0) * th_count + th) * tw_count
            for i in range(4):          # along the columns: (B^T d) B, into V's 4 streams
                e = uint64(2 * i * half)
                o = e + uint64(half)
                d0 = uint64(((4 * i) * T + t0) * C)
                d1 = uint64(((4 * i + 1) * T + t0) * C)
                d2 = uint64(((4 * i + 2) * T + t0) * C)
                d3 = uint64(((4 * i + 3) * T + t0) * C)
                for p in range(span):
                    v[d0 + p] = buf[e + p] - buf[e + C_ + p]
                for p in range(span):
                    v[d1 + p] = buf[o + p] + buf[e + C_ + p]
                for p in range(span):
                    v[d2 + p] = buf[e + C_ + p] - buf[o + p]
                for p in range(span):
                    v[d3 + p] = buf[o + p] - buf[o + C_ + p]


@njit(cache=True, nogil=True)
def _winograd_output(mm, y, dims, pad, n0, m, scale, shift, mode, act):
    """y (N*OH*OW, F) rows of images [n0, n0 + m) = epilogue(A^T M A) of mm (16, T, F).

    A row of tiles at a time, as _winograd_input: A^T along the block's columns gives, per
    block row r, the even (E_r) and odd (O_r) output columns of the whole row of tiles; A^T
    along the rows and the epilogue are long loops over those; then each output pixel is one
    run of F copied into y."""
    _, H, W, F = dims
    ph, pw = pad
    OH = H + 2 * ph - 2
    OW = W + 2 * pw - 2
    th_count = (OH + 1) // 2
    tw_count = (OW + 1) // 2
    T = m * th_count * tw_count
    span = uint64(tw_count * F)
    buf = np.empty(8 * tw_count * F, y.dtype)     # rows r = 0..3, E then O
    # the epilogue's per-channel scale and shift repeated along a row of tiles
    scale_row = np.empty(tw_count * F, y.dtype)
    shift_row = np.empty(tw_count * F, y.dtype)
    for kk in range(tw_count):
        for f in range(F):
            scale_row[kk * F + f] = scale[f] if mode == 2 else y.dtype.type(1)
            shift_row[kk * F + f] = shift[f] if mode >= 1 else y.dtype.type(0)
    epilogue = mode > 0 or act >= 0
    zero = y.dtype.type(0)
    for n in range(n0, n0 + m):
        for th in range(th_count):
            t0 = ((n - n0) * th_count + th) * tw_count
            for r in range(4):          # along the columns: M A
                s0 = uint64(((4 * r) * T + t0) * F)
                s1 = uint64(((4 * r + 1) * T + t0) * F)
                s2 = uint64(((4 * r + 2) * T + t0) * F)
                s3 = uint64(((4 * r + 3) * T + t0) * F)
                e = uint64(2 * r) * span
                o = e + span
                for p in range(span):
                    buf[e + p] = mm[s0 + p] + mm[s1 + p] + mm[s2 + p]
                for p in range(span):
                    buf[o + p] = mm[s1 + p] - mm[s2 + p] - mm[s3 + p]
            for parity in range(2):     # along the rows: A^T (M A), into rows 0 and 1
                r0 = uint64(parity) * span
                r1 = r0 + uint64(2) * span
                r2 = r1 + uint64(2) * span
                r3 = r2 + uint64(2) * span
                for p in range(span):
                    a = buf[r0 + p]
                    b = buf[r1 + p]
                    c = buf[r2 + p]
                    d = buf[r3 + p]
                    buf[r0 + p] = a + b + c
                    buf[r1 + p] = b - c - d
                if epilogue:
                    for row in (r0, r1):
                        for p in range(span):
                            val = buf[row + p] * scale_row[p] + shift_row[p]
                            if act == ACT_RELU:
                                val = val if val > 0 else zero
                            elif act >= 0:
                                val = activation_value(val, act)
                            buf[row + p] = val
            for i in range(2):
                oh = 2 * th + i
                if oh >= OH:
                    continue
                for kk in range(tw_count):
                    for j in range(2):
                        ow = 2 * kk + j
                        if ow < OW:
                            copy_run(y, ((n * OH + oh) * OW + ow) * F, buf,
                                     (2 * i + j) * tw_count * F + kk * F, F)


def winograd_conv_last(xt, u, y_rows, v, mm, dims, pad, chunk, scale=None, shift=None, act=-1):
    """y_rows (n*OH*OW, F) = act(conv3x3(xt) * scale[f] + shift[f]) at stride 1: xt channel-last
    (n, H, W, C) (``dims`` = (n, C, H, W)), u the transformed kernels (``winograd_weights``),
    pad (ph, pw); the output is channel-last too. v and mm are scratch of
    ``winograd_scratch_shapes(dims, pad, parts, chunk)``: the images are split into ``parts``
    run at once (threads), ``chunk`` images at a time."""
    n, C, H, W = dims
    F = u.shape[2]
    parts = v.shape[0]
    pad = (int(pad[0]), int(pad[1]))
    th, tw = _tiles(H, W, pad)
    scale, shift, mode = _epilogue_args(y_rows.dtype, scale, shift)
    flat_x = xt.reshape(-1)
    flat_y = y_rows.reshape(-1)
    xdims = (n, H, W, C)
    ydims = (n, H, W, F)

    def run(part):
        first, end = part * n // parts, (part + 1) * n // parts
        for n0 in range(first, end, chunk):
            m = min(chunk, end - n0)
            tiles = m * th * tw
            vp = v[part].reshape(-1)[:16 * tiles * C].reshape(16, tiles, C)
            mp = mm[part].reshape(-1)[:16 * tiles * F].reshape(16, tiles, F)
            _winograd_input(flat_x, vp.reshape(-1), xdims, pad, n0, m)
            np.matmul(vp, u, out=mp)
            _winograd_output(mp.reshape(-1), flat_y, ydims, pad, n0, m, scale, shift, mode, act)

    run_parts(run, parts)


def winograd_chunk(dims, pad, parts):
    """Images per chunk for WINOGRAD_BUDGET (each part holds chunk images' tiles at once)."""
    n, C, H, W = dims
    th, tw = _tiles(H, W, pad)
    per_image = 16 * th * tw * C
    per_part = -(-n // parts)
    return max(1, min(per_part, WINOGRAD_BUDGET // max(1, per_image)))
