"""Implicit-GEMM convolution for NVIDIA GPUs: forward, data gradient and weight gradient as
tiled matrix products whose patch matrix is never written to memory.

A convolution of data (n, C, D, H, W) (1-D and 2-D run with leading ones, geometry tuple ``g`` of
``kernels/cpu/conv.py``) by weights (F, C/groups, KD, KH, KW) is, per group, three products:

    forward          y[f, (n, o)]     = sum over k = (c, tap)  of  w[f, k]  * P[k, (n, o)]
    data gradient    dx[c, (n, i)]    = sum over k = (f, tap)  of  w[f, c, tap] * Q[k, (n, i)]
    weight gradient  dw[f, (c, tap)]  = sum over q = (n, o)    of  dy[n, f, o] * P[(c, tap), q]

P is the patch (column) matrix: the data pixel tap ``tap`` of output pixel o reads, 0 in the
padding. Q is its gather-form transpose: dy at the output pixel whose tap ``tap`` reads input
pixel i, 0 where no window puts that tap there (strides skip, the edges clip). Each block of
``_Tile.threads`` threads owns a (bm x bn) tile of the result; per step of ``bk`` along the
reduction it copies a tile of each operand into shared memory, gathering P or Q from the image
on the fly with the padding test, and every thread multiplies a (tm x tn) register tile. The
global loads of the next step are issued before the current step's arithmetic (register
prefetch); the (channel, tap) or pixel decoding of the reduction index, which needs integer
divisions, is done once per step by ``bk`` threads into a small shared table.

Results go straight to the channel-first arrays: the forward applies bias, or the inference
plan's folded BatchNorm scale / shift and activation, in its store; the data gradient writes or
adds. Every output element is summed by one thread in a fixed order, so results are
deterministic and no atomics are used. The weight gradient reduces over n*O, far more than its
small output gives parallelism for, so the reduction is split into ``splits`` fixed chunks,
one block row each, whose partial tiles a second kernel adds in chunk order.

``implicit_conv_fits`` is the one rule choosing between these kernels and the im2col / im2row +
GEMM path of ``kernels/cuda/conv.py``.
"""
import os

import numpy as np
from numba import cuda, float32, float64, int32, int64

from ..cuda_support import simulator_enabled
from .conv import _epilogue
from .memory import fill, flat, launch_config

__all__ = ["implicit_conv_fits", "implicit_conv_forward", "implicit_conv_backward_data",
           "implicit_conv_backward_weight", "implicit_weight_scratch"]


class _Tile:
    """One block shape: a (bm x bn) result tile, bk reduction steps per shared-memory tile
    (twice that for the weight gradient, whose loads run along the reduction), (tm x tn)
    results per thread."""

    def __init__(self, name, bm, bn, bk, tm, tn):
        self.name, self.bm, self.bn, self.bk, self.tm, self.tn = name, bm, bn, bk, tm, tn
        self.threads = (bm // tm) * (bn // tn)
        self.bk_weight = 2 * bk
        # the load patterns below give every thread whole rows / columns of the operand tiles
        for step in (bk, self.bk_weight):
            assert self.threads % step == 0 and self.threads % bn == 0
            assert (step * bm) % self.threads == 0 and (step * bn) % self.threads == 0
        assert self.threads <= 1024

    def grid(self, rows, cols, depth):
        return (-(-cols // self.bn), -(-rows // self.bm), depth)


if simulator_enabled():
    # the simulator runs every thread as a Python thread: small blocks, so tiny test shapes
    # still cross several tiles and split the weight gradient's reduction
    TILES = (_Tile("wide", 8, 8, 4, 2, 2), _Tile("narrow", 4, 16, 4, 2, 2))
    TARGET_BLOCKS = 4
    MIN_SPLIT_STEPS = 2
else:
    # 256 threads, 4x4 results each; "narrow" for products with at most 32 rows (LeNet's 20
    # filters fill 62% of its rows instead of 31%)
    TILES = (_Tile("wide", 64, 64, 8, 4, 4), _Tile("narrow", 32, 128, 8, 4, 4))
    # blocks the weight gradient aims for (a few per SM of an H100 / H200: 132 SMs), and the
    # fewest reduction steps one of its chunks gets
    TARGET_BLOCKS = 512
    MIN_SPLIT_STEPS = 4


# a window corner outside every image: marks the reduction indices and columns past the end
_OUTSIDE = -(1 << 30)


def _tile_for(rows, cols):
    """The tile that pads a rows x cols product least (the wide one on ties)."""
    def padded(t):
        return -(-rows // t.bm) * t.bm * (-(-cols // t.bn) * t.bn)
    return min(TILES, key=padded)


# ---------------------------------------------------------------------------------------------
# Forward: y (n, F, O) = w (F, cg*K) @ P per group, P gathered from x
# ---------------------------------------------------------------------------------------------
def _forward_kernel(nbtype, tile):
    BM, BN, BK, TM, TN, THREADS = tile.bm, tile.bn, tile.bk, tile.tm, tile.tn, tile.threads
    THREADS_M, THREADS_N = BM // TM, BN // TN
    A_LOADS, A_STEP = BK * BM // THREADS, THREADS // BK
    B_LOADS, B_STEP = BK * BN // THREADS, THREADS // BN
    A_WIDTH = BM + 1        # padded: the k-major stores of the weight tile hit distinct banks

    @cuda.jit
    def forward(x, w, y, dims, g, nf, groups, scale, shift, mode, act):
        a_tile = cuda.shared.array((BK, A_WIDTH), nbtype)
        b_tile = cuda.shared.array((BK, BN), nbtype)
        # per reduction index k = (c, kd, kh, kw) of a step: its offset in the image and its
        # tap offsets along d, h, w (two slots: this step's and the next one's)
        tab_off = cuda.shared.array((2, BK), int32)
        tab_d = cuda.shared.array((2, BK), int32)
        tab_h = cuda.shared.array((2, BK), int32)
        tab_w = cuda.shared.array((2, BK), int32)
        acc = cuda.local.array((TM, TN), nbtype)
        a_next = cuda.local.array(A_LOADS, nbtype)
        b_next = cuda.local.array(B_LOADS, nbtype)
        a_frag = cuda.local.array(TM, nbtype)
        b_frag = cuda.local.array(TN, nbtype)
        out_base = cuda.local.array(TN, int64)

        t = cuda.threadIdx.x
        tx = t % THREADS_N
        ty = t // THREADS_N
        nimg, C, D, H, W = dims
        KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
        taps = KD * KH * KW
        cg = C // groups
        fg = nf // groups
        kdim = cg * taps
        osize = OD * OH * OW
        npix = nimg * osize
        grp = cuda.blockIdx.z
        m0 = cuda.blockIdx.y * BM
        q0 = cuda.blockIdx.x * BN

        # the output pixel whose patch column this thread gathers, for the whole reduction
        b_col = t % BN
        b_row = t // BN
        bq = q0 + b_col
        pix_ok = bq < npix
        n = bq // osize
        o = bq - n * osize
        od = o // (OH * OW)
        oh = (o - od * OH * OW) // OW
        ow = o - (od * OH + oh) * OW
        d0 = od * SD - PD
        h0 = oh * SH - PH
        w0 = ow * SW - PW
        x_base = (n * C + grp * cg) * D * H * W + (d0 * H + h0) * W + w0
        # the filter rows and reduction column of the weight tile this thread loads
        a_col = t % BK
        a_row = t // BK
        w_base = (grp * fg + m0) * kdim

        for i in range(TM):
            for j in range(TN):
                acc[i, j] = 0
        steps = (kdim + BK - 1) // BK
        if t < BK:
            k = t
            c = k // taps
            tap = k - c * taps
            kd = tap // (KH * KW)
            kh = (tap - kd * KH * KW) // KW
            kw = tap - (kd * KH + kh) * KW
            tab_d[0, t] = kd * DD
            tab_h[0, t] = kh * DH
            tab_w[0, t] = kw * DW
            tab_off[0, t] = ((c * D + kd * DD) * H + kh * DH) * W + kw * DW
        cuda.syncthreads()
        for step in range(steps + 1):
            slot = step % 2
            if step < steps:
                # global loads of this step, in flight while the previous step multiplies
                k0 = step * BK
                for e in range(A_LOADS):
                    m = m0 + a_row + e * A_STEP
                    k = k0 + a_col
                    v = nbtype(0)
                    if m < fg and k < kdim:
                        v = w[w_base + (a_row + e * A_STEP) * kdim + k]
                    a_next[e] = v
                for e in range(B_LOADS):
                    kk = b_row + e * B_STEP
                    v = nbtype(0)
                    if pix_ok and k0 + kk < kdim:
                        di = d0 + tab_d[slot, kk]
                        hi = h0 + tab_h[slot, kk]
                        wi = w0 + tab_w[slot, kk]
                        if 0 <= di < D and 0 <= hi < H and 0 <= wi < W:
                            v = x[x_base + tab_off[slot, kk]]
                    b_next[e] = v
            if step > 0:
                for kk in range(BK):
                    for i in range(TM):
                        a_frag[i] = a_tile[kk, ty + i * THREADS_M]
                    for j in range(TN):
                        b_frag[j] = b_tile[kk, tx + j * THREADS_N]
                    for i in range(TM):
                        for j in range(TN):
                            acc[i, j] += a_frag[i] * b_frag[j]
            cuda.syncthreads()
            if step < steps:
                for e in range(A_LOADS):
                    a_tile[a_col, a_row + e * A_STEP] = a_next[e]
                for e in range(B_LOADS):
                    b_tile[b_row + e * B_STEP, b_col] = b_next[e]
                if t < BK:
                    k = (step + 1) * BK + t
                    c = k // taps
                    tap = k - c * taps
                    kd = tap // (KH * KW)
                    kh = (tap - kd * KH * KW) // KW
                    kw = tap - (kd * KH + kh) * KW
                    tab_d[1 - slot, t] = kd * DD
                    tab_h[1 - slot, t] = kh * DH
                    tab_w[1 - slot, t] = kw * DW
                    tab_off[1 - slot, t] = ((c * D + kd * DD) * H + kh * DH) * W + kw * DW
            cuda.syncthreads()

        for j in range(TN):
            q = q0 + tx + j * THREADS_N
            img = q // osize
            out_base[j] = img * nf * osize + q - img * osize
        for i in range(TM):
            m = m0 + ty + i * THREADS_M
            if m < fg:
                f = grp * fg + m
                for j in range(TN):
                    if q0 + tx + j * THREADS_N < npix:
                        y[out_base[j] + f * osize] = _epilogue(acc[i, j], f, scale, shift, mode,
                                                               act)
    return forward


# ---------------------------------------------------------------------------------------------
# Data gradient: dx (n, C, I) (+)= w^T (cg, fg*K) @ Q per group, Q gathered from dy
# ---------------------------------------------------------------------------------------------
@cuda.jit(device=True)
def _source_output(t, stride, size):
    """The output position o with o * stride == t along one axis, or -1 when there is none."""
    if t < 0:
        return -1
    if stride != 1:
        if t % stride != 0:
            return -1
        t = t // stride
    return t if t < size else -1


def _data_kernel(nbtype, tile):
    BM, BN, BK, TM, TN, THREADS = tile.bm, tile.bn, tile.bk, tile.tm, tile.tn, tile.threads
    THREADS_M, THREADS_N = BM // TM, BN // TN
    A_LOADS, A_STEP = BK * BM // THREADS, THREADS // BK
    B_LOADS, B_STEP = BK * BN // THREADS, THREADS // BN
    A_WIDTH = BM + 1

    @cuda.jit
    def backward_data(dy, w, dx, dims, g, nf, groups, accumulate):
        a_tile = cuda.shared.array((BK, A_WIDTH), nbtype)
        b_tile = cuda.shared.array((BK, BN), nbtype)
        # per reduction index k = (f, kd, kh, kw): f's offset in dy, the offset of w[f, 0, tap],
        # and pad minus the tap's offset along d, h, w
        tab_dy = cuda.shared.array((2, BK), int32)
        tab_wt = cuda.shared.array((2, BK), int32)
        tab_d = cuda.shared.array((2, BK), int32)
        tab_h = cuda.shared.array((2, BK), int32)
        tab_w = cuda.shared.array((2, BK), int32)
        acc = cuda.local.array((TM, TN), nbtype)
        a_next = cuda.local.array(A_LOADS, nbtype)
        b_next = cuda.local.array(B_LOADS, nbtype)
        a_frag = cuda.local.array(TM, nbtype)
        b_frag = cuda.local.array(TN, nbtype)
        out_base = cuda.local.array(TN, int64)

        t = cuda.threadIdx.x
        tx = t % THREADS_N
        ty = t // THREADS_N
        nimg, C, D, H, W = dims
        KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
        taps = KD * KH * KW
        cg = C // groups
        fg = nf // groups
        kdim = fg * taps
        osize = OD * OH * OW
        isize = D * H * W
        npix = nimg * isize
        grp = cuda.blockIdx.z
        m0 = cuda.blockIdx.y * BM
        q0 = cuda.blockIdx.x * BN

        # the input pixel whose gradient column this thread gathers
        b_col = t % BN
        b_row = t // BN
        bq = q0 + b_col
        pix_ok = bq < npix
        n = bq // isize
        i_pix = bq - n * isize
        di = i_pix // (H * W)
        hi = (i_pix - di * H * W) // W
        wi = i_pix - (di * H + hi) * W
        dy_base = (n * nf + grp * fg) * osize
        a_col = t % BK
        a_row = t // BK
        w_base = grp * fg * cg * taps + m0 * taps

        for i in range(TM):
            for j in range(TN):
                acc[i, j] = 0
        steps = (kdim + BK - 1) // BK
        if t < BK:
            k = t
            f = k // taps
            tap = k - f * taps
            kd = tap // (KH * KW)
            kh = (tap - kd * KH * KW) // KW
            kw = tap - (kd * KH + kh) * KW
            tab_dy[0, t] = f * osize
            tab_wt[0, t] = f * cg * taps + tap
            tab_d[0, t] = PD - kd * DD
            tab_h[0, t] = PH - kh * DH
            tab_w[0, t] = PW - kw * DW
        cuda.syncthreads()
        for step in range(steps + 1):
            slot = step % 2
            if step < steps:
                k0 = step * BK
                for e in range(A_LOADS):
                    m = m0 + a_row + e * A_STEP
                    v = nbtype(0)
                    if m < cg and k0 + a_col < kdim:
                        v = w[w_base + tab_wt[slot, a_col] + (a_row + e * A_STEP) * taps]
                    a_next[e] = v
                for e in range(B_LOADS):
                    kk = b_row + e * B_STEP
                    v = nbtype(0)
                    if pix_ok and k0 + kk < kdim:
                        od = _source_output(di + tab_d[slot, kk], SD, OD)
                        oh = _source_output(hi + tab_h[slot, kk], SH, OH)
                        ow = _source_output(wi + tab_w[slot, kk], SW, OW)
                        if od >= 0 and oh >= 0 and ow >= 0:
                            v = dy[dy_base + tab_dy[slot, kk] + (od * OH + oh) * OW + ow]
                    b_next[e] = v
            if step > 0:
                for kk in range(BK):
                    for i in range(TM):
                        a_frag[i] = a_tile[kk, ty + i * THREADS_M]
                    for j in range(TN):
                        b_frag[j] = b_tile[kk, tx + j * THREADS_N]
                    for i in range(TM):
                        for j in range(TN):
                            acc[i, j] += a_frag[i] * b_frag[j]
            cuda.syncthreads()
            if step < steps:
                for e in range(A_LOADS):
                    a_tile[a_col, a_row + e * A_STEP] = a_next[e]
                for e in range(B_LOADS):
                    b_tile[b_row + e * B_STEP, b_col] = b_next[e]
                if t < BK:
                    k = (step + 1) * BK + t
                    f = k // taps
                    tap = k - f * taps
                    kd = tap // (KH * KW)
                    kh = (tap - kd * KH * KW) // KW
                    kw = tap - (kd * KH + kh) * KW
                    tab_dy[1 - slot, t] = f * osize
                    tab_wt[1 - slot, t] = f * cg * taps + tap
                    tab_d[1 - slot, t] = PD - kd * DD
                    tab_h[1 - slot, t] = PH - kh * DH
                    tab_w[1 - slot, t] = PW - kw * DW
            cuda.syncthreads()

        for j in range(TN):
            q = q0 + tx + j * THREADS_N
            img = q // isize
            out_base[j] = img * C * isize + q - img * isize
        for i in range(TM):
            m = m0 + ty + i * THREADS_M
            if m < cg:
                c = grp * cg + m
                for j in range(TN):
                    if q0 + tx + j * THREADS_N < npix:
                        if accumulate:
                            dx[out_base[j] + c * isize] += acc[i, j]
                        else:
                            dx[out_base[j] + c * isize] = acc[i, j]
    return backward_data


# ---------------------------------------------------------------------------------------------
# Weight gradient: dw (F, cg*K) (+)= dy (fg, n*O) @ P^T per group, the n*O reduction split into
# fixed chunks (blockIdx.z = group * splits + chunk) whose partial tiles _sum_chunks_k adds
# ---------------------------------------------------------------------------------------------
def _weight_kernel(nbtype, tile):
    BM, BN, BK, TM, TN, THREADS = tile.bm, tile.bn, tile.bk_weight, tile.tm, tile.tn, tile.threads
    THREADS_M, THREADS_N = BM // TM, BN // TN
    A_LOADS, A_STEP = BK * BM // THREADS, THREADS // BK
    B_LOADS, B_STEP = BK * BN // THREADS, THREADS // BK
    A_WIDTH = BM + 1        # both tiles are stored reduction-major: padded against conflicts
    B_WIDTH = BN + 1

    @cuda.jit
    def backward_weight(x, dy, out, dims, g, nf, groups, splits, chunk, accumulate):
        a_tile = cuda.shared.array((BK, A_WIDTH), nbtype)
        b_tile = cuda.shared.array((BK, B_WIDTH), nbtype)
        # per reduction index q = (n, o): the window's corner offset in x and its corner
        # coordinates, and the pixel's offset in dy
        tab_x = cuda.shared.array((2, BK), int64)
        tab_dy = cuda.shared.array((2, BK), int64)
        tab_d = cuda.shared.array((2, BK), int32)
        tab_h = cuda.shared.array((2, BK), int32)
        tab_w = cuda.shared.array((2, BK), int32)
        acc = cuda.local.array((TM, TN), nbtype)
        a_next = cuda.local.array(A_LOADS, nbtype)
        b_next = cuda.local.array(B_LOADS, nbtype)
        a_frag = cuda.local.array(TM, nbtype)
        b_frag = cuda.local.array(TN, nbtype)
        # the (channel, tap) columns this thread loads, decoded once
        col_off = cuda.local.array(B_LOADS, int32)
        col_d = cuda.local.array(B_LOADS, int32)
        col_h = cuda.local.array(B_LOADS, int32)
        col_w = cuda.local.array(B_LOADS, int32)

        t = cuda.threadIdx.x
        tx = t % THREADS_N
        ty = t // THREADS_N
        nimg, C, D, H, W = dims
        KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
        taps = KD * KH * KW
        cg = C // groups
        fg = nf // groups
        ncols = cg * taps
        osize = OD * OH * OW
        grp = cuda.blockIdx.z // splits
        part = cuda.blockIdx.z - grp * splits
        q_begin = part * chunk
        q_end = min(q_begin + chunk, nimg * osize)
        m0 = cuda.blockIdx.y * BM
        n0 = cuda.blockIdx.x * BN

        kk_own = t % BK             # the reduction row this thread loads, in both tiles
        a_row = t // BK
        b_row = t // BK
        for e in range(B_LOADS):
            col = n0 + b_row + e * B_STEP
            c = col // taps
            tap = col - c * taps
            kd = tap // (KH * KW)
            kh = (tap - kd * KH * KW) // KW
            kw = tap - (kd * KH + kh) * KW
            col_d[e] = kd * DD if col < ncols else _OUTSIDE
            col_h[e] = kh * DH
            col_w[e] = kw * DW
            col_off[e] = ((c * D + kd * DD) * H + kh * DH) * W + kw * DW

        for i in range(TM):
            for j in range(TN):
                acc[i, j] = 0
        steps = (q_end - q_begin + BK - 1) // BK
        if t < BK:
            q = q_begin + t
            n = q // osize
            o = q - n * osize
            od = o // (OH * OW)
            oh = (o - od * OH * OW) // OW
            ow = o - (od * OH + oh) * OW
            tab_d[0, t] = od * SD - PD if q < q_end else _OUTSIDE
            tab_h[0, t] = oh * SH - PH
            tab_w[0, t] = ow * SW - PW
            tab_x[0, t] = (n * C + grp * cg) * D * H * W + ((od * SD - PD) * H
                                                             + oh * SH - PH) * W + ow * SW - PW
            tab_dy[0, t] = (n * nf + grp * fg) * osize + o
        cuda.syncthreads()
        for step in range(steps + 1):
            slot = step % 2
            if step < steps:
                q_ok = q_begin + step * BK + kk_own < q_end
                for e in range(A_LOADS):
                    m = m0 + a_row + e * A_STEP
                    v = nbtype(0)
                    if q_ok and m < fg:
                        v = dy[tab_dy[slot, kk_own] + (m0 + a_row + e * A_STEP) * osize]
                    a_next[e] = v
                for e in range(B_LOADS):
                    v = nbtype(0)
                    di = tab_d[slot, kk_own] + col_d[e]
                    hi = tab_h[slot, kk_own] + col_h[e]
                    wi = tab_w[slot, kk_own] + col_w[e]
                    if 0 <= di < D and 0 <= hi < H and 0 <= wi < W:
                        v = x[tab_x[slot, kk_own] + col_off[e]]
                    b_next[e] = v
            if step > 0:
                for kk in range(BK):
                    for i in range(TM):
                        a_frag[i] = a_tile[kk, ty + i * THREADS_M]
                    for j in range(TN):
                        b_frag[j] = b_tile[kk, tx + j * THREADS_N]
                    for i in range(TM):
                        for j in range(TN):
                            acc[i, j] += a_frag[i] * b_frag[j]
            cuda.syncthreads()
            if step < steps:
                for e in range(A_LOADS):
                    a_tile[kk_own, a_row + e * A_STEP] = a_next[e]
                for e in range(B_LOADS):
                    b_tile[kk_own, b_row + e * B_STEP] = b_next[e]
                if t < BK:
                    q = q_begin + (step + 1) * BK + t
                    n = q // osize
                    o = q - n * osize
                    od = o // (OH * OW)
                    oh = (o - od * OH * OW) // OW
                    ow = o - (od * OH + oh) * OW
                    tab_d[1 - slot, t] = od * SD - PD if q < q_end else _OUTSIDE
                    tab_h[1 - slot, t] = oh * SH - PH
                    tab_w[1 - slot, t] = ow * SW - PW
                    tab_x[1 - slot, t] = (n * C + grp * cg) * D * H * W + (
                        (od * SD - PD) * H + oh * SH - PH) * W + ow * SW - PW
                    tab_dy[1 - slot, t] = (n * nf + grp * fg) * osize + o
            cuda.syncthreads()

        base = part * nf * ncols
        for i in range(TM):
            m = m0 + ty + i * THREADS_M
            if m < fg:
                row = base + (grp * fg + m) * ncols
                for j in range(TN):
                    col = n0 + tx + j * THREADS_N
                    if col < ncols:
                        if accumulate:
                            out[row + col] += acc[i, j]
                        else:
                            out[row + col] = acc[i, j]
    return backward_weight


@cuda.jit
def _sum_chunks_k(partial, dw, splits, accumulate):
    """dw[i] (+)= the sum over chunks s = 0, 1, ... of partial[s, i], in that order."""
    size = dw.size
    for i in range(cuda.grid(1), size, cuda.gridsize(1)):
        s = partial[i]
        for part in range(1, splits):
            s += partial[part * size + i]
        if accumulate:
            dw[i] += s
        else:
            dw[i] = s


def _by_dtype(make):
    return {"%s_%s" % (np.dtype(dt).name, tile.name): make(nbtype, tile)
            for dt, nbtype in ((np.float32, float32), (np.float64, float64)) for tile in TILES}


_FORWARD = _by_dtype(_forward_kernel)
_DATA = _by_dtype(_data_kernel)
_WEIGHT = _by_dtype(_weight_kernel)


# ---------------------------------------------------------------------------------------------
# The rule, and the launchers
# ---------------------------------------------------------------------------------------------
def implicit_conv_fits(dims, g, groups, nf, dtype):
    """Whether Convolution on the GPU runs these kernels rather than the im2col / im2row +
    GEMM path of kernels/cuda/conv.py (the operator asks once per call, forward and backward
    alike).

    Every shape, in float32 and float64 (float16 arrives as float32 copies): the implicit
    kernels read each input once per tile instead of writing and re-reading a patch matrix
    K times the size of the image, and need no scratch memory but the weight gradient's
    chunk partials. Measured on an H200 (bench_gpu.py --conv, float32), they beat the
    im2col / im2row + GEMM path on every layer and pass: 2.2x-12.6x on LeNet's 1->20 layer
    (batch 128), 5.6x-17.7x on its 20->50 layer, 10x-28x on 3x3 64->64 at 56x56 (7.2-9.2
    TFLOP/s) and 49x-100x on 3x3 32->32 at 32x32 (batch 32), where the old path writes a
    patch matrix 9x the image and runs many small products. So no shape goes back; the
    im2col path stays for other dtypes, for Deconvolution and the other users of its
    kernels, and behind LIGHTMOD_CUDA_CONV=im2col (comparisons, bench_gpu.py --conv)."""
    if os.environ.get("LIGHTMOD_CUDA_CONV", "implicit") == "im2col":
        return False
    return np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float64))


def _kernel(table, dtype, tile):
    return table["%s_%s" % (np.dtype(dtype).name, tile.name)]


def implicit_conv_forward(x, w, y, dims, g, groups, scale=None, shift=None, act=-1):
    """y (n, F, *out) = act(conv(x, w) * scale[f] + shift[f]); x has the 5-d shape dims
    (n, C, D, H, W) and geometry g; scale / shift None are left out (shift alone: a bias)."""
    if y.size == 0:
        return
    nf = w.shape[0]
    npix = dims[0] * g[12] * g[13] * g[14]
    tile = _tile_for(nf // groups, npix)
    yf = flat(y)
    mode = 2 if scale is not None else (1 if shift is not None else 0)
    kernel = _kernel(_FORWARD, y.dtype, tile)
    kernel[tile.grid(nf // groups, npix, groups), tile.threads](
        flat(x), flat(w), yf, tuple(dims), tuple(g), nf, groups,
        yf if scale is None else flat(scale), yf if shift is None else flat(shift), mode, act)


def implicit_conv_backward_data(dy, w, dx, dims, g, groups, accumulate=False):
    """dx (n, C, D, H, W) = (or +=) the data gradient of the convolution for output gradient
    dy, gathered per input pixel (deterministic, no atomics)."""
    if dx.size == 0:
        return
    nf = w.shape[0]
    cg = dims[1] // groups
    npix = dims[0] * dims[2] * dims[3] * dims[4]
    if dy.size == 0:
        if not accumulate:
            fill(dx, 0)
        return
    tile = _tile_for(cg, npix)
    kernel = _kernel(_DATA, dx.dtype, tile)
    kernel[tile.grid(cg, npix, groups), tile.threads](
        flat(dy), flat(w), flat(dx), tuple(dims), tuple(g), nf, groups, bool(accumulate))


def _weight_split(dims, g, groups, nf):
    """(tile, chunks, pixels per chunk) of the weight gradient's reduction over n*O."""
    cg = dims[1] // groups
    ncols = cg * g[0] * g[1] * g[2]
    tile = _tile_for(nf // groups, ncols)
    total = dims[0] * g[12] * g[13] * g[14]
    steps = -(-total // tile.bk_weight)
    gx, gy, _ = tile.grid(nf // groups, ncols, groups)
    splits = max(1, min(steps // MIN_SPLIT_STEPS, -(-TARGET_BLOCKS // (gx * gy * groups))))
    chunk = -(-steps // splits) * tile.bk_weight
    return tile, -(-total // chunk) if total else 1, chunk


def implicit_weight_scratch(dims, g, groups, nf):
    """Elements of the partial-sum buffer implicit_conv_backward_weight needs (at least 1)."""
    _, splits, _ = _weight_split(dims, g, groups, nf)
    ncols = dims[1] // groups * g[0] * g[1] * g[2]
    return nf * ncols * splits if splits > 1 else 1


def implicit_conv_backward_weight(x, dy, dw, dims, g, groups, partial, accumulate=False):
    """dw (F, C/groups, *kernel) = (or +=) the weight gradient, the reduction over n*O split
    into fixed chunks added in order (deterministic); ``partial`` holds
    implicit_weight_scratch(...) elements."""
    if dw.size == 0:
        return
    nf = dw.shape[0]
    if dy.size == 0:
        if not accumulate:
            fill(dw, 0)
        return
    tile, splits, chunk = _weight_split(dims, g, groups, nf)
    cg = dims[1] // groups
    ncols = cg * g[0] * g[1] * g[2]
    dwf = flat(dw)
    out = dwf if splits == 1 else flat(partial)[:splits * dwf.size]
    kernel = _kernel(_WEIGHT, dw.dtype, tile)
    kernel[tile.grid(nf // groups, ncols, groups * splits), tile.threads](
        flat(x), flat(dy), out, tuple(dims), tuple(g), nf, groups, splits, chunk,
        bool(accumulate) and splits == 1)
    if splits > 1:
        _sum_chunks_k[launch_config(dwf.size)](out, dwf, splits, bool(accumulate))
