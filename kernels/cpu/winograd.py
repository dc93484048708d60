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

The input and output transforms work one tile at a time with the channels as the contiguous,
vectorised axis (channel-last data): the tile is gathered into a 16 x C buffer (zeros where it
hangs over the padding), transformed in place by two passes of ``B^T``, and scattered into V;
the output pass applies ``A^T`` to M's 16 x F values and the epilogue (per-channel scale and
shift, activation) before writing the 2x2 pixels it keeps (an odd output size drops a row or
column of the last tiles).
"""
import numpy as np
from numba import njit, uint64

from ..scalar_nn import ACT_RELU, activation_value
from .conv import _epilogue_args, copy_run, fill_run, run_parts

__all__ = ["winograd_weights", "winograd_conv_last", "winograd_scratch_shapes", "winograd_chunk"]

# transformed-input elements (16 * tiles * C) per chunk of images: 1 MB of float32, so V and M
# stay in the caches between the transform, the 16 products and the output pass (measured on
# the ResNet block: chunks of 512 tiles 2.5 ms of products per batch, 1024-2048 tiles 3.3 ms)
WINOGRAD_BUDGET = 1 << 18

# G (4 x 3): the kernel transform U = G g G^T
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def winograd_weights(w, u):
    """u (16, C, F) = the transformed kernels G g G^T of w (F, C, 3, 3), position xi = 4*a + b
    of the 4x4 block first."""
    f, c = w.shape[0], w.shape[1]
    t = np.einsum("ai,fcij,bj->abcf", _G, w.astype(np.float64), _G)
    u[...] = t.reshape(16, c, f)


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
    x (N, H, W, C), tiles in (image, tile row, tile column) order."""
    _, H, W, C = dims
    ph, pw = pad
    th_count = (H + 2 * ph - 1) // 2
    tw_count = (W + 2 * pw - 1) // 2
    per_image = th_count * tw_count
    T = m * per_image
    C_ = uint64(C)
    buf = np.empty(16 * C, x.dtype)
    zero = x.dtype.type(0)
    for t in range(T):
        n = n0 + t // per_image
        r = t % per_image
        h0 = 2 * (r // tw_count) - ph
        w0 = 2 * (r % tw_count) - pw
        for i in range(4):
            h = h0 + i
            for j in range(4):
                w = w0 + j
                dst = uint64(i * 4 + j) * C_
                if h < 0 or h >= H or w < 0 or w >= W:
                    fill_run(buf, dst, zero, C)
                else:
                    copy_run(buf, dst, x, ((n * H + h) * W + w) * C, C)
        for j in range(4):          # along the rows: B^T d
            _bt_pass(buf, C, uint64(j) * C_, uint64(4 + j) * C_, uint64(8 + j) * C_,
                     uint64(12 + j) * C_)
        for i in range(4):          # along the columns: (B^T d) B
            _bt_pass(buf, C, uint64(4 * i) * C_, uint64(4 * i + 1) * C_, uint64(4 * i + 2) * C_,
                     uint64(4 * i + 3) * C_)
        for xi in range(16):
            copy_run(v, (xi * T + t) * C, buf, xi * C, C)


@njit(cache=True, nogil=True)
def _winograd_output(mm, y, dims, pad, n0, m, scale, shift, mode, act):
    """y (N*OH*OW, F) rows of images [n0, n0 + m) = epilogue(A^T M A) of mm (16, T, F)."""
    _, H, W, F = dims
    ph, pw = pad
    OH = H + 2 * ph - 2
    OW = W + 2 * pw - 2
    th_count = (OH + 1) // 2
    tw_count = (OW + 1) // 2
    per_image = th_count * tw_count
    T = m * per_image
    F_ = uint64(F)
    buf = np.empty(16 * F, y.dtype)
    for t in range(T):
        n = n0 + t // per_image
        r = t % per_image
        oh0 = 2 * (r // tw_count)
        ow0 = 2 * (r % tw_count)
        for xi in range(16):
            copy_run(buf, xi * F, mm, (xi * T + t) * F, F)
        # along the rows: A^T M (rows 0 and 1 of the 4 x 4 block receive the 2 x 4 result)
        for j in range(4):
            s0 = uint64(j) * F_
            s1 = uint64(4 + j) * F_
            s2 = uint64(8 + j) * F_
            s3 = uint64(12 + j) * F_
            for f in range(F_):
                a = buf[s0 + f]
                b = buf[s1 + f]
                c = buf[s2 + f]
                d = buf[s3 + f]
                buf[s0 + f] = a + b + c
                buf[s1 + f] = b - c - d
        # along the columns, the epilogue, and the store of the 2 x 2 pixels inside the output
        for i in range(2):
            oh = oh0 + i
            if oh >= OH:
                continue
            s0 = uint64(4 * i) * F_
            s1 = s0 + F_
            s2 = s1 + F_
            s3 = s2 + F_
            for j in range(2):
                ow = ow0 + j
                if ow >= OW:
                    continue
                dst = uint64(((n * OH + oh) * OW + ow) * F)
                for f in range(F_):
                    a = buf[s0 + f]
                    b = buf[s1 + f]
                    c = buf[s2 + f]
                    d = buf[s3 + f]
                    val = a + b + c if j == 0 else b - c - d
                    if mode == 2:
                        val = val * scale[f]
                    if mode >= 1:
                        val = val + shift[f]
                    if act == ACT_RELU:
                        val = val if val > 0 else y.dtype.type(0)
                    elif act >= 0:
                        val = activation_value(val, act)
                    y[dst + f] = val


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
