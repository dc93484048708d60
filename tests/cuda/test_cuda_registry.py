"""Every registered operator and every optimizer runs on gpu(0) and agrees with cpu(0).

Run under NUMBA_ENABLE_CUDASIM=1 (or on a GPU). The operator list is the registry itself, so
a newly registered operator is covered automatically: it runs with two (2, 3) float32 inputs
per declared input unless ``CASES`` below says otherwise, and an operator those defaults do
not fit fails here until it gets a case. For each case:

* forward through ``mx.nd.op.<op>`` on NDArrays of both devices, seeded alike for the random
  operators: same outputs, same in-place updates of the inputs (aux states, optimizer weights
  and states);
* the training forward and backward through the registry on both kernel sets with the same
  head gradients: same input gradients;
* the forward again in float16, wherever the CPU computes it.

The optimizers are the registry of ``mx.optimizer`` (``Optimizer.opt_registry``), each run
for two steps with its weight, gradient and states on either device.
"""
import zlib

import numpy as np
import ophelpers as oh
import pytest

import lightmod as mx
from lightmod.kernels import cuda_support
from lightmod.operator import registry

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]

CPU, GPU = mx.cpu(0), mx.gpu(0)


# ---------------------------------------------------------------------------------------------
# input descriptions: shape plus how to fill it
# ---------------------------------------------------------------------------------------------
class In:
    """One input: ``kind`` is 'signed' (uniform in [-1, 1]), 'positive' ([0.5, 1.5]),
    'index' (integers in [0, high) stored as float32), 'mask' (0/1), 'half' (float16),
    'above_one' ([1.2, 2.5]), 'unit' ([0.2, 1], probabilities), 'spd' (symmetric
    positive-definite matrices on the last two axes) or 'codes' (int8 integers)."""

    def __init__(self, shape, kind="signed", high=None):
        self.shape, self.kind, self.high = tuple(shape), kind, high

    def make(self, rng):
        if self.kind == "index":
            return rng.integers(0, self.high, self.shape).astype(np.float32)
        if self.kind == "mask":
            return rng.integers(0, 2, self.shape).astype(np.float32)
        if self.kind == "positive":
            return rng.uniform(0.5, 1.5, self.shape).astype(np.float32)
        if self.kind == "above_one":
            return rng.uniform(1.2, 2.5, self.shape).astype(np.float32)
        if self.kind == "spd":
            x = rng.uniform(-1, 1, self.shape)
            n = self.shape[-1]
            return (x @ np.swapaxes(x, -1, -2) + n * np.eye(n)).astype(np.float32)
        if self.kind == "codes":
            return rng.integers(-128, 128, self.shape).astype(np.int8)
        if self.kind == "unit":
            return rng.uniform(0.2, 1.0, self.shape).astype(np.float32)
        values = rng.uniform(-1, 1, self.shape)
        return values.astype(np.float16 if self.kind == "half" else np.float32)


def S(*shape):
    return In(shape)


def P(*shape):
    return In(shape, "positive")


def Idx(high, *shape):
    return In(shape, "index", high)


def H(*shape):
    return In(shape, "half")


DEFAULT_SHAPE = (2, 3)
# operators whose inputs must be positive for their values to be meaningful
POSITIVE = {"log", "log10", "log2", "log1p", "sqrt", "rsqrt", "_power", "broadcast_power",
            "_power_scalar", "_rpower_scalar", "nanprod", "prod", "_mod", "_rmod_scalar",
            "broadcast_mod", "_mod_scalar", "gamma", "gammaln"}

OPT = dict(lr=0.1, wd=0.01)
MOM = dict(lr=0.1, wd=0.01, momentum=0.9)

# name -> list of (attrs, inputs); None inputs are inferred from the others
CASES = {
    "Activation": [({"act_type": "tanh"}, [S(2, 3)]),
                   ({"act_type": "softrelu"}, [S(2, 3)])],
    "BatchNorm": [({"fix_gamma": False}, [S(2, 3, 2), P(3), S(3), S(3), P(3)])],
    "Cast": [({"dtype": "float64"}, [S(2, 3)]), ({"dtype": "int32"}, [S(2, 3)])],
    "arccosh": [({}, [In((2, 3), "above_one")])],
    "amp_cast": [({"dtype": "float16"}, [S(2, 3)]), ({"dtype": "float32"}, [H(2, 3)])],
    "cast_storage": [({"stype": "csr"}, [S(2, 3)]), ({"stype": "row_sparse"}, [S(2, 3)])],
    "Concat": [({"num_args": 2, "dim": 1}, [S(2, 3), S(2, 2)])],
    # a Python custom operator (registered by lightmod.testing.custom_ops)
    "Custom": [({"op_type": __import__("lightmod.testing.custom_ops").testing.custom_ops
                 .SOFTSIGN}, [S(2, 3)])],
    "Convolution": [({"kernel": (2, 2), "num_filter": 2, "pad": (1, 0)},
                     [S(1, 2, 3, 3), None, None])],
    "Crop": [({"num_args": 1, "h_w": (2, 2), "offset": (1, 0)}, [S(1, 1, 3, 4)])],
    "Deconvolution": [({"kernel": (2, 2), "num_filter": 2, "stride": (2, 1)},
                       [S(1, 2, 2, 3), None])],
    "Dropout": [({"p": 0.5}, [S(4, 5)])],
    "Embedding": [({"input_dim": 5, "output_dim": 3}, [Idx(5, 2, 3), None])],
    "amp_multicast": [({"num_outputs": 2}, [S(2, 3), H(2, 3)])],
    "_contrib_SparseEmbedding": [({"input_dim": 5, "output_dim": 3}, [Idx(5, 2, 3), None])],
    "Flatten": [({}, [S(2, 3, 2)])],
    "FullyConnected": [({"num_hidden": 3}, [S(2, 4), None, None]),
                       ({"num_hidden": 2, "no_bias": True, "flatten": False},
                        [S(2, 2, 3), None])],
    "InstanceNorm": [({}, [S(2, 3, 4), None, None])],
    "L2Normalization": [({"mode": "channel"}, [S(2, 3, 2)])],
    "LRN": [({"nsize": 3}, [S(1, 4, 2, 2)])],
    "LayerNorm": [({}, [S(2, 5), None, None])],
    "LeakyReLU": [({"act_type": "leaky", "slope": 0.3}, [S(2, 3)]),
                  ({"act_type": "prelu"}, [S(2, 3, 2), P(3)]),
                  ({"act_type": "elu"}, [S(2, 3)]),
                  ({"act_type": "rrelu"}, [S(2, 3)])],
    "LogisticRegressionOutput": [({}, [S(2, 3), In((2, 3), "mask")])],
    "Pad": [({"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 1, 2, 0), "constant_value": 1},
             [S(1, 1, 2, 3)]),
            ({"mode": "reflect", "pad_width": (0, 0, 0, 0, 1, 1, 2, 2)}, [S(1, 1, 3, 3)])],
    "Pooling": [({"kernel": (2, 2), "pool_type": "max", "stride": (1, 1)}, [S(1, 2, 3, 3)]),
                ({"kernel": (2, 2), "pool_type": "avg", "pad": (1, 1), "stride": (2, 2)},
                 [S(1, 1, 3, 3)])],
    "RNN": [({"state_size": 2, "num_layers": 1, "mode": "lstm", "state_outputs": True},
             [S(2, 2, 3), None, None, None])],
    "Reshape": [({"shape": (3, -1)}, [S(2, 3)])],
    "SliceChannel": [({"num_outputs": 3, "axis": 1}, [S(2, 3)])],
    "SoftmaxOutput": [({"normalization": "batch"}, [S(2, 3), Idx(3, 2)])],
    "SVMOutput": [({"margin": 0.5}, [S(2, 3), Idx(3, 2)]), ({"use_linear": True}, [S(2, 3), Idx(3, 2)])],
    "SwapAxis": [({"dim1": 0, "dim2": 2}, [S(2, 3, 2)])],
    "UpSampling": [({"scale": 2, "sample_type": "nearest", "num_args": 1}, [S(1, 1, 2, 2)])],
    "_full": [({"shape": (2, 3), "value": 2.5}, [])],
    "_ones": [({"shape": (2, 3)}, [])],
    "_zeros": [({"shape": (2, 3)}, [])],
    "_sparse_retain": [({}, [S(4, 3), Idx(4, 2)])],
    "_sparse_adagrad_update": [({"lr": 0.1, "epsilon": 1e-7}, [S(2, 3), S(2, 3), P(2, 3)])],
    "adam_update": [({"lr": 0.01, "wd": 0.01}, [S(2, 3), S(2, 3), S(2, 3), P(2, 3)])],
    "add_n": [({"num_args": 3}, [S(2, 3), S(2, 3), S(2, 3)])],
    "argsort": [({"axis": 1, "is_ascend": False}, [S(2, 3)])],
    "batch_dot": [({"transpose_b": True}, [S(2, 2, 3), S(2, 4, 3)])],
    "broadcast_axis": [({"axis": 0, "size": 2}, [S(1, 3)])],
    "broadcast_like": [({}, [S(1, 3), S(2, 3)])],
    "broadcast_to": [({"shape": (2, 3)}, [S(1, 3)])],
    "clip": [({"a_min": -0.5, "a_max": 0.5}, [S(2, 3)])],
    "dot": [({}, [S(2, 3), S(3, 2)]), ({"transpose_a": True}, [S(3, 2), S(3, 2)])],
    "expand_dims": [({"axis": 1}, [S(2, 3)])],
    "ftml_update": [({"lr": 0.05, "t": 1, "wd": 0.01}, [S(2, 3), S(2, 3), S(2, 3), P(2, 3),
                                                         S(2, 3)])],
    "ftrl_update": [({"lr": 0.1, "wd": 0.01}, [S(2, 3), S(2, 3), S(2, 3), P(2, 3)])],
    "lamb_update_phase1": [({"t": 1, "wd": 0.01}, [S(2, 3), S(2, 3), S(2, 3), P(2, 3)])],
    "lamb_update_phase2": [({"lr": 0.1}, [S(2, 3), S(2, 3), P(1), P(1)])],
    "max": [({"axis": 1}, [S(2, 3)])],
    "mean": [({"axis": 0, "keepdims": True}, [S(2, 3)])],
    "mp_lamb_update_phase1": [({"t": 1, "wd": 0.01}, [H(2, 3), H(2, 3), S(2, 3), P(2, 3),
                                                      S(2, 3)])],
    "mp_lamb_update_phase2": [({"lr": 0.1}, [H(2, 3), S(2, 3), P(1), P(1), S(2, 3)])],
    "mp_nag_mom_update": [(MOM, [H(2, 3), H(2, 3), S(2, 3), S(2, 3)])],
    "mp_sgd_mom_update": [(MOM, [H(2, 3), H(2, 3), S(2, 3), S(2, 3)])],
    "mp_sgd_update": [(OPT, [H(2, 3), H(2, 3), S(2, 3)])],
    "multi_lars": [({"eta": 0.01, "eps": 1e-8, "rescale_grad": 0.5},
                    [P(2), P(2), P(2), P(2)])],
    "multi_mp_sgd_mom_update": [({"lrs": (0.1,), "wds": (0.01,), "momentum": 0.9},
                                 [H(2, 3), H(2, 3), S(2, 3), S(2, 3)])],
    "multi_mp_sgd_update": [({"lrs": (0.1,), "wds": (0.01,)}, [H(2, 3), H(2, 3), S(2, 3)])],
    "multi_sgd_mom_update": [({"lrs": (0.1, 0.2), "wds": (0.01, 0.0), "momentum": 0.9,
                               "num_weights": 2},
                              [S(2, 3), S(2, 3), S(2, 3), S(4), S(4), S(4)])],
    "multi_sgd_update": [({"lrs": (0.1,), "wds": (0.01,)}, [S(2, 3), S(2, 3)])],
    "multi_sum_sq": [({"num_arrays": 2}, [S(2, 3), S(5)])],
    "nag_mom_update": [(MOM, [S(2, 3), S(2, 3), S(2, 3)])],
    "norm": [({"ord": 1, "axis": 1}, [S(2, 3)])],
    "one_hot": [({"depth": 3}, [Idx(4, 2, 2)])],
    "pick": [({"axis": 1}, [S(2, 3), Idx(3, 2)])],
    "preloaded_multi_mp_sgd_mom_update": [({"momentum": 0.9}, [H(2, 3), H(2, 3), S(2, 3),
                                                               S(2, 3), P(1), P(1)])],
    "preloaded_multi_mp_sgd_update": [({}, [H(2, 3), H(2, 3), S(2, 3), P(1), P(1)])],
    "preloaded_multi_sgd_mom_update": [({"momentum": 0.9}, [S(2, 3), S(2, 3), S(2, 3), P(1),
                                                            P(1)])],
    "preloaded_multi_sgd_update": [({}, [S(2, 3), S(2, 3), P(1), P(1)])],
    "repeat": [({"repeats": 2, "axis": 1}, [S(2, 3)])],
    "reverse": [({"axis": 1}, [S(2, 3)])],
    "rmsprop_update": [({"lr": 0.01, "wd": 0.01}, [S(2, 3), S(2, 3), P(2, 3)])],
    "rmspropalex_update": [({"lr": 0.01, "wd": 0.01}, [S(2, 3), S(2, 3), P(2, 3), S(2, 3),
                                                       S(2, 3)])],
    "sgd_mom_update": [(MOM, [S(2, 3), S(2, 3), S(2, 3)])],
    "sgd_update": [(OPT, [S(2, 3), S(2, 3)])],
    "signsgd_update": [(OPT, [S(2, 3), S(2, 3)])],
    "signum_update": [(MOM, [S(2, 3), S(2, 3), S(2, 3)])],
    "slice": [({"begin": (0, 1), "end": (2, 3)}, [S(2, 3)])],
    "slice_axis": [({"axis": 1, "begin": 0, "end": 2}, [S(2, 3)])],
    "softmax": [({"axis": 1, "temperature": 2.0}, [S(2, 3)])],
    "softmin": [({"axis": 0, "temperature": 0.5}, [S(2, 3)])],
    "softmax_cross_entropy": [({}, [S(2, 3), Idx(3, 2)])],
    "squeeze": [({}, [S(2, 1, 3)])],
    "stack": [({"num_args": 2, "axis": 1}, [S(2, 3), S(2, 3)])],
    "sum": [({"axis": 1}, [S(2, 3)]), ({"axis": (0, 2), "exclude": True}, [S(2, 3, 2)])],
    "take": [({}, [S(4, 3), Idx(4, 3)])],
    "_contrib_index_copy": [({}, [S(4, 3), Idx(4, 3), S(3, 3)])],
    "tile": [({"reps": (2, 1)}, [S(2, 3)])],
    "topk": [({"axis": 1, "k": 2, "ret_typ": "both"}, [S(2, 3)])],
    "where": [({}, [In((2, 3), "mask"), S(2, 3), S(2, 3)])],
    # linalg: matrices on the last two axes
    "_linalg_gemm": [({"alpha": 0.5, "beta": 2.0}, [S(2, 3), S(3, 2), S(2, 2)]),
                     ({"transpose_b": True, "axis": -3}, [S(3, 2, 4), S(5, 2, 4), S(3, 2, 5)])],
    "_linalg_gemm2": [({"alpha": 2.0, "transpose_a": True}, [S(2, 3, 2), S(2, 3, 4)])],
    "_linalg_syrk": [({"alpha": 0.5}, [S(2, 2, 3)]), ({"transpose": True}, [S(2, 3)])],
    "_linalg_trmm": [({"rightside": True, "lower": False, "alpha": 1.5}, [S(2, 3, 3), S(2, 2, 3)])],
    "_linalg_trsm": [({"transpose": True, "alpha": 0.5}, [In((2, 3, 3), "above_one"),
                                                         S(2, 3, 2)])],
    "_linalg_potrf": [({}, [In((2, 3, 3), "spd")]), ({"lower": False}, [In((3, 3), "spd")])],
    "_linalg_potri": [({}, [In((2, 3, 3), "above_one")])],
    "_linalg_sumlogdiag": [({}, [P(2, 3, 3)])],
    "_linalg_gelqf": [({}, [S(2, 2, 3)])],
    "_linalg_syevd": [({}, [In((2, 3, 3), "spd")])],
    "_linalg_inverse": [({}, [In((2, 3, 3), "spd")])],
    "_linalg_det": [({}, [S(2, 3, 3)])],
    "_linalg_slogdet": [({}, [S(2, 3, 3)])],
    "_linalg_extractdiag": [({"offset": 1}, [S(2, 3, 3)])],
    "_linalg_makediag": [({"offset": -1}, [S(2, 3)])],
    "_linalg_extracttrian": [({"lower": False}, [S(2, 3, 3)])],
    "_linalg_maketrian": [({"offset": 1}, [S(2, 6)])],
    # contrib
    "_contrib_quadratic": [({"a": 0.5, "b": -1.0, "c": 2.0}, [S(2, 3)])],
    "_contrib_quantize": [({"out_type": "int8"}, [S(2, 3), P(1), P(1)]),
                          ({"out_type": "uint8"}, [S(2, 3), P(1), P(1)])],
    "_contrib_dequantize": [({}, [In((2, 3), "codes"), P(1), P(1)])],
    "_contrib_interleaved_matmul_selfatt_qk": [({"heads": 2}, [S(3, 2, 12)])],
    "_contrib_interleaved_matmul_selfatt_valatt": [({"heads": 2}, [S(3, 2, 12), S(4, 3, 3)])],
    "_contrib_interleaved_matmul_encdec_qk": [({"heads": 2}, [S(3, 2, 4), S(5, 2, 8)])],
    "_contrib_interleaved_matmul_encdec_valatt": [({"heads": 2}, [S(5, 2, 8), S(4, 3, 5)])],
    "ctc_loss": [({}, [S(6, 2, 5), Idx(5, 2, 3)]),
                 ({"blank_label": "last", "use_data_lengths": True},
                  [S(6, 2, 5), Idx(4, 2, 2), In((2,), "index", 7)])],
    # operators added for MXNet's operator breadth
    "_arange": [({"start": 1.5, "stop": 9, "step": 1.5, "repeat": 2}, []),
                ({"start": 1.3, "stop": 20, "step": 1.3, "dtype": "int32"}, [])],
    "_contrib_arange_like": [({"start": 1.5, "step": 0.5}, [S(2, 3)]),
                             ({"axis": 0, "repeat": 2}, [S(3, 2)])],
    "_eye": [({"N": 3, "M": 4, "k": 1}, []), ({"N": 4, "k": -2}, [])],
    "_linspace": [({"start": -2.5, "stop": 7.0, "num": 5}, []),
                  ({"start": 0, "stop": 3.0, "num": 4, "endpoint": False}, [])],
    "_slice_assign": [({"begin": (0, 1), "end": (2, None), "step": (1, 2)}, [S(2, 4), S(2, 2)])],
    "_slice_assign_scalar": [({"begin": (1,), "end": (2,), "scalar": 3.5}, [S(2, 3)])],
    "_split_v2": [({"indices": (0, 1), "axis": 1}, [S(2, 3)])],
    "_histogram": [({"bin_cnt": 4, "range": (-0.5, 0.5)}, [S(3, 5)]),
                   ({}, [S(3, 5), In((3,), "index", 1)])],
    "_ravel_multi_index": [({"shape": (3, 4)}, [Idx(3, 2, 5)]), ({"shape": (-1, 4)}, [Idx(3, 2, 5)])],
    "_unravel_index": [({"shape": (3, 4)}, [Idx(12, 5)]), ({"shape": (-1, 2, 2)}, [Idx(12, 5)])],
    "all_finite": [({}, [S(2, 3)])],
    "gather_nd": [({}, [S(3, 4, 2), Idx(3, 2, 5)])],
    # one index: repeated indices keep an unspecified one of their values on a GPU
    "scatter_nd": [({"shape": (3, 4, 2)}, [S(1, 2), Idx(3, 2, 1)])],
    "batch_take": [({}, [S(3, 4), Idx(4, 3)])],
    "choose_element_0index": [({}, [S(3, 4), Idx(4, 3)])],
    "depth_to_space": [({"block_size": 2}, [S(1, 8, 2, 3)])],
    "diag": [({"k": 1}, [S(3, 4)]), ({"k": -1}, [S(3)]), ({"axis1": 2, "axis2": 0}, [S(2, 3, 4)])],
    "fill_element_0index": [({}, [S(3, 4), S(3), Idx(4, 3)])],
    "hard_sigmoid": [({"alpha": 0.4, "beta": 0.3}, [S(2, 3)])],
    "moments": [({"axes": (0, 2), "keepdims": True}, [S(2, 3, 2)])],
    "multi_all_finite": [({"num_arrays": 2}, [S(2, 3), S(4)])],
    "slice_like": [({"axes": (1,)}, [S(2, 4), S(1, 3)])],
    "space_to_depth": [({"block_size": 2}, [S(1, 2, 4, 2)])],
    "split_v2": [({"indices_or_sections": (1, 2), "axis": 1}, [S(2, 3)])],
    # the random family: parameters inside each law's domain (seeded alike, both devices draw
    # the same numbers)
    "_random_uniform": [({"low": -1.0, "high": 2.0, "shape": (2, 3)}, [])],
    "_random_normal": [({"loc": 1.0, "scale": 2.0, "shape": (2, 3)}, [])],
    "_random_gamma": [({"alpha": 2.0, "beta": 0.5, "shape": (2, 3)}, [])],
    "_random_exponential": [({"lam": 2.0, "shape": (2, 3)}, [])],
    "_random_poisson": [({"lam": 3.0, "shape": (2, 3)}, [])],
    "_random_negative_binomial": [({"k": 3, "p": 0.4, "shape": (2, 3)}, [])],
    "_random_generalized_negative_binomial": [({"mu": 2.0, "alpha": 0.5, "shape": (2, 3)}, [])],
    "_random_randint": [({"low": -2, "high": 5, "shape": (2, 3)}, [])],
    "_sample_uniform": [({"shape": (2,)}, [S(2, 3), In((2, 3), "above_one")])],
    "_sample_normal": [({"shape": (2,)}, [S(2, 3), P(2, 3)])],
    "_sample_gamma": [({}, [P(2, 3), P(2, 3)])],
    "_sample_exponential": [({}, [P(2, 3)])],
    "_sample_poisson": [({}, [P(2, 3)])],
    "_sample_negative_binomial": [({}, [P(2, 3), In((2, 3), "unit")])],
    "_sample_generalized_negative_binomial": [({}, [P(2, 3), P(2, 3)])],
    "_sample_multinomial": [({"shape": (4,), "get_prob": True}, [P(2, 3)])],
    "_sample_unique_zipfian": [({"range_max": 50, "shape": (2, 5)}, [])],
    "im2col": [({"kernel": (2, 2), "stride": (1, 2), "pad": (1, 0)}, [S(1, 2, 3, 4)])],
    # 2 channels x 2x2 windows, on the 4 x 2 window positions of a 3x4 image
    "col2im": [({"output_size": (3, 4), "kernel": (2, 2), "stride": (1, 2), "pad": (1, 0)},
                [S(1, 8, 8)])],
}

class Fixed(In):
    """An input with given values (regions of interest)."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float32)
        super().__init__(self.values.shape, "fixed")

    def make(self, rng):
        return self.values.copy()


ROIS = Fixed([[0, 1.2, 0.5, 6.1, 4.4], [1, 0.0, 2.0, 3.3, 7.9], [0, 4.0, 4.0, 4.0, 4.0]])
ROTATED_ROIS = Fixed([[0, 3.0, 4.0, 4.0, 3.0, 30.0], [1, 5.0, 2.5, 6.0, 2.0, 120.0]])

# sequence, spatial and detection operators, and the normalisations added beside them
CASES.update({
    "ROIPooling": [({"pooled_size": (2, 3), "spatial_scale": 0.5}, [S(2, 3, 5, 5), ROIS])],
    "_contrib_PSROIPooling": [({"spatial_scale": 0.5, "output_dim": 2, "pooled_size": 2},
                               [S(2, 8, 5, 5), ROIS])],
    "_contrib_ROIAlign": [({"pooled_size": (2, 3), "spatial_scale": 0.5}, [S(2, 3, 5, 5), ROIS]),
                          ({"pooled_size": (2, 2), "spatial_scale": 0.5, "sample_ratio": 2,
                            "position_sensitive": True, "aligned": True},
                           [S(2, 8, 5, 5), ROIS])],
    "_contrib_RROIAlign": [({"pooled_size": (2, 2), "spatial_scale": 0.8, "sampling_ratio": 2},
                            [S(2, 2, 6, 6), ROTATED_ROIS])],
    "_contrib_Proposal": [({"feature_stride": 4, "scales": (1.0, 2.0), "ratios": (1.0,),
                           "rpn_post_nms_top_n": 6, "rpn_min_size": 2, "output_score": True},
                          [P(1, 4, 3, 4), S(1, 8, 3, 4), Fixed([[11.0, 15.0, 1.0]])])],
    "_contrib_MultiProposal": [({"feature_stride": 4, "scales": (2.0,), "ratios": (0.5, 2.0),
                                "rpn_pre_nms_top_n": 10, "rpn_post_nms_top_n": 5,
                                "threshold": 0.5, "rpn_min_size": 1},
                               [P(2, 4, 3, 3), S(2, 8, 3, 3),
                                Fixed([[12.0, 12.0, 1.0], [9.0, 11.0, 0.5]])])],
    "_contrib_DeformableConvolution": [
        ({"kernel": (3, 3), "num_filter": 2, "pad": (1, 1), "num_deformable_group": 2},
         [S(2, 4, 4, 3), S(2, 36, 4, 3), None, None]),
        ({"kernel": (2, 2), "num_filter": 4, "num_group": 2, "stride": (2, 1), "no_bias": True},
         [S(1, 2, 5, 4), S(1, 8, 2, 3), None])],
    "BatchNorm_v1": [({"fix_gamma": False}, [S(2, 3, 2), P(3), S(3), S(3), P(3)])],
    "_contrib_SyncBatchNorm": [({"fix_gamma": False, "key": "bn"},
                                [S(2, 3, 2), P(3), S(3), S(3), P(3)])],
    "GroupNorm": [({"num_groups": 2}, [S(2, 4, 3), S(2), S(2)])],
    "_image_normalize": [({"mean": (0.1, 0.2), "std": (0.5, 2.0)}, [S(2, 2, 3, 2)])],
    "SequenceMask": [({"use_sequence_length": True, "value": -1.0, "axis": 1},
                      [S(3, 4, 2), In((3,), "index", 5)])],
    "SequenceReverse": [({"use_sequence_length": True}, [S(4, 3, 2), In((3,), "index", 5)])],
    "SequenceLast": [({"use_sequence_length": True}, [S(4, 3, 2), In((3,), "index", 5)]),
                     ({"axis": 1}, [S(3, 4, 2)])],
    "_contrib_BilinearResize2D": [({"height": 5, "width": 3}, [S(1, 2, 3, 4)]),
                                  ({"mode": "like", "align_corners": False},
                                   [S(1, 2, 3, 4), S(1, 1, 4, 7)])],
    "_contrib_AdaptiveAvgPooling2D": [({"output_size": (2, 3)}, [S(1, 2, 5, 4)])],
    "GridGenerator": [({"transform_type": "affine", "target_shape": (3, 4)}, [S(2, 6)]),
                      ({"transform_type": "warp"}, [S(1, 2, 3, 4)])],
    "BilinearSampler": [({}, [S(1, 2, 4, 5), In((1, 2, 3, 3), "signed")])],
    "SpatialTransformer": [({"transform_type": "affine", "sampler_type": "bilinear",
                             "target_shape": (3, 3)}, [S(2, 1, 4, 4), S(2, 6)])],
    "Correlation": [({"kernel_size": 3, "max_displacement": 2, "stride2": 2, "pad_size": 2},
                     [S(1, 2, 5, 4), S(1, 2, 5, 4)]),
                    ({"is_multiply": False}, [S(2, 1, 4, 4), S(2, 1, 4, 4)])],
})


def default_case(op):
    """Attributes and inputs for an operator without an entry in CASES."""
    attrs = {"scalar": 0.5} if "scalar" in op.params else {}
    p = op.parse(attrs)
    names = op.list_inputs(p)
    positive = op.name in POSITIVE
    if op.name.startswith("broadcast_") and len(names) == 2:
        shapes = [(2, 3), (1, 3)]          # exercise broadcasting
    else:
        shapes = [DEFAULT_SHAPE] * len(names)
    return attrs, [In(s, "positive" if positive else "signed") for s in shapes]


def all_cases():
    out = []
    for name in sorted(registry.all_ops()):
        op = registry.get(name)
        cases = CASES.get(name) or [default_case(op)]
        for i, (attrs, inputs) in enumerate(cases):
            out.append(pytest.param(name, attrs, inputs, id="%s-%d" % (name, i)))
    return out


def test_cases_name_registered_operators():
    unknown = sorted(set(CASES) - set(registry.all_ops()))
    assert not unknown, "CASES for operators that are not registered: %s" % unknown


# ---------------------------------------------------------------------------------------------
# running a case on both devices
# ---------------------------------------------------------------------------------------------
def _host_inputs(op, p, inputs, rng):
    """numpy arrays for every input, unknown shapes inferred from the given ones."""
    names = op.list_inputs(p)
    assert len(inputs) == len(names), "%s takes inputs %s" % (op.name, names)
    shapes = [None if x is None else x.shape for x in inputs]
    if any(s is None for s in shapes):
        shapes, _ = op.infer_shape(p, shapes)
    return [(In(shape) if x is None else x).make(rng) for x, shape in zip(inputs, shapes)]


def _tolerance(dtype):
    if np.dtype(dtype) == np.float16:
        return dict(rtol=2e-3, atol=2e-3)
    return dict(rtol=1e-4, atol=1e-5)


def _assert_close(gpu, cpu, what):
    assert gpu.dtype == cpu.dtype, "%s: dtype %s on the GPU, %s on the CPU" % (
        what, gpu.dtype, cpu.dtype)
    np.testing.assert_allclose(gpu.astype(np.float64), cpu.astype(np.float64),
                               err_msg=what, **_tolerance(cpu.dtype))


def _nd_forward(op, attrs, host, ctx):
    """Outputs and the inputs afterwards (updated in place by optimizer ops / aux states)."""
    attrs = dict(attrs)
    if not host and "ctx" in op.params:
        attrs["ctx"] = ctx
    arrays = [mx.nd.array(x, ctx=ctx, dtype=x.dtype) for x in host]
    mx.random.seed(7)
    with ctx:       # operators without inputs or a ctx attribute run on the current context
        outs = getattr(mx.nd.op, op.name)(*arrays, **attrs)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    for o in outs:
        assert o.context == ctx, "%s: output on %s, expected %s" % (op.name, o.context, ctx)
    return [o.asnumpy() for o in outs], [a.asnumpy() for a in arrays]


def _backward(op, attrs, host, heads, req, device):
    mx.random.seed(7)
    return oh.backward(op.name, attrs, [x.copy() for x in host], heads, req=req, device=device)


@pytest.mark.parametrize("name,attrs,inputs", all_cases())
def test_operator_on_gpu_matches_cpu(name, attrs, inputs):
    op = registry.get(name)
    if op.variadic is not None:
        attrs = dict(attrs, **{op.variadic: len(inputs)})
    p = op.parse({k: str(v) for k, v in attrs.items()})
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    host = _host_inputs(op, p, inputs, rng)

    outs_cpu, ins_cpu = _nd_forward(op, attrs, host, CPU)
    outs_gpu, ins_gpu = _nd_forward(op, attrs, host, GPU)
    for i, (g, c) in enumerate(zip(outs_gpu, outs_cpu)):
        _assert_close(g, c, "%s: output %d" % (name, i))
    for arg, g, c in zip(op.list_inputs(p), ins_gpu, ins_cpu):
        _assert_close(g, c, "%s: input %s after the call" % (name, arg))

    if not host or not op.has_backward(p):
        return
    heads = [rng.uniform(-1, 1, o.shape).astype(o.dtype) for o in outs_cpu]
    # indices and labels are not differentiable; aux states take no gradient
    aux = set(op.list_aux(p))
    req = ["null" if arg in aux or (x is not None and x.kind in ("index", "fixed")) else "write"
           for arg, x in zip(op.list_inputs(p), inputs)]
    grads_cpu = _backward(op, attrs, host, heads, req, "cpu")
    grads_gpu = _backward(op, attrs, host, heads, req, "cuda")
    for arg, g, c in zip(op.list_inputs(p), grads_gpu, grads_cpu):
        if c is not None:
            _assert_close(g, c, "%s: gradient of %s" % (name, arg))


# ---------------------------------------------------------------------------------------------
# optimizers
# ---------------------------------------------------------------------------------------------
# name -> parameter sets (the registry's defaults when absent); every set also runs with
# clip_gradient and rescale_grad
OPTIMIZER_PARAMS = {
    "sgd": [{"momentum": 0.0}, {"momentum": 0.9},
            {"momentum": 0.9, "multi_precision": True}],
    "nag": [{"momentum": 0.0}, {"momentum": 0.9},
            {"momentum": 0.9, "multi_precision": True}],
    "ccsgd": [{"momentum": 0.9}],
    "signum": [{"momentum": 0.0}, {"momentum": 0.9, "wd_lh": 0.01}],
    "dcasgd": [{"momentum": 0.0}, {"momentum": 0.9}],
    "rmsprop": [{"centered": False}, {"centered": True}],
    "adam": [{}, {"lazy_update": False}],
    "lamb": [{}, {"bias_correction": False, "lower_bound": 0.1, "upper_bound": 2.0}],
    "lars": [{"momentum": 0.9}],
    "lbsgd": [{"momentum": 0.9}],
    "ftml": [{}],
    "ftrl": [{}],
    "sgld": [{}],
}


def optimizer_cases():
    out = []
    for name in sorted(mx.optimizer.Optimizer.opt_registry):
        for i, params in enumerate(OPTIMIZER_PARAMS.get(name, [{}])):
            out.append(pytest.param(name, params, id="%s-%d" % (name, i)))
    return out


def _states(state):
    """The NDArrays of an optimizer state (None, an NDArray, or nested tuples), as numpy."""
    if state is None:
        return []
    if isinstance(state, (list, tuple)):
        return [a for s in state for a in _states(s)]
    return [state.asnumpy()]


def _run_optimizer(name, params, ctx, weight, grads):
    opt = mx.optimizer.create(name, learning_rate=0.05, wd=0.01, rescale_grad=0.5,
                              clip_gradient=0.8, **params)
    w = mx.nd.array(weight, ctx=ctx, dtype=weight.dtype)
    state = opt.create_state_multi_precision(0, w)
    mx.random.seed(11)                       # SGLD's noise
    for g in grads:
        opt.update_multi_precision(0, w, mx.nd.array(g, ctx=ctx, dtype=g.dtype), state)
    return w.asnumpy(), _states(state)


@pytest.mark.parametrize("name,params", optimizer_cases())
def test_optimizer_on_gpu_matches_cpu(name, params):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    dtype = np.float16 if params.get("multi_precision") else np.float32
    weight = rng.uniform(-1, 1, (3, 4)).astype(dtype)
    grads = [rng.uniform(-2, 2, (3, 4)).astype(dtype) for _ in range(2)]
    w_cpu, s_cpu = _run_optimizer(name, params, CPU, weight, grads)
    w_gpu, s_gpu = _run_optimizer(name, params, GPU, weight, grads)
    _assert_close(w_gpu, w_cpu, "%s: weight" % name)
    assert len(s_gpu) == len(s_cpu)
    for i, (g, c) in enumerate(zip(s_gpu, s_cpu)):
        _assert_close(g, c, "%s: state %d" % (name, i))


# ---------------------------------------------------------------------------------------------
# float16: what the CPU computes in half precision, the GPU computes too
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,attrs,inputs", all_cases())
def test_operator_float16_forward_on_gpu(name, attrs, inputs):
    op = registry.get(name)
    if op.variadic is not None:
        attrs = dict(attrs, **{op.variadic: len(inputs)})
    p = op.parse({k: str(v) for k, v in attrs.items()})
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    host = [x.astype(np.float16) if x.dtype == np.float32 else x
            for x in _host_inputs(op, p, inputs, rng)]
    try:
        outs_cpu, ins_cpu = _nd_forward(op, attrs, host, CPU)
    except (mx.MXNetError, TypeError, ValueError) as err:
        pytest.skip("not defined for float16 on the CPU either: %s" % err)
    outs_gpu, ins_gpu = _nd_forward(op, attrs, host, GPU)
    for i, (g, c) in enumerate(zip(outs_gpu, outs_cpu)):
        _assert_close(g, c, "%s: output %d" % (name, i))
    for arg, g, c in zip(op.list_inputs(p), ins_gpu, ins_cpu):
        _assert_close(g, c, "%s: input %s after the call" % (name, arg))
