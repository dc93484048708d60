"""Every operator the ONNX exporter covers: a one-operator model and a two-operator chain,
exported (opsets 12 and 13, dynamic batch), checked by onnx.checker, run by ONNX Runtime at two
batch sizes and compared with lightmod's forward, then imported back where the importer reads
the result."""
import numpy as np
import pytest
from onnx_helpers import check_export

import lightmod as mx

S = mx.sym
D = S.Variable("data")
D2 = S.Variable("data2")
D3 = S.Variable("data3")


def case(build, shapes, domain="any", round_trip=True, rtol=1e-5, kind="float"):
    return {"build": build, "shapes": shapes, "domain": domain, "round_trip": round_trip,
            "rtol": rtol, "kind": kind}


# operator -> variants; shapes use "N" for the (dynamic) batch size
CASES = {
    "FullyConnected": [
        case(lambda: S.FullyConnected(D, num_hidden=4, name="op"), {"data": ("N", 3, 5)}),
        case(lambda: S.FullyConnected(D, num_hidden=4, no_bias=True, name="op"), {"data": ("N", 6)}),
        case(lambda: S.FullyConnected(D, num_hidden=4, flatten=False, name="op"),
             {"data": ("N", 3, 5)}),
    ],
    "Convolution": [
        case(lambda: S.Convolution(D, kernel=(3, 3), num_filter=4, pad=(1, 1), stride=(2, 1),
                                   name="op"), {"data": ("N", 3, 7, 6)}),
        case(lambda: S.Convolution(D, kernel=(3, 3), num_filter=4, dilate=(2, 2), num_group=2,
                                   no_bias=True, name="op"), {"data": ("N", 4, 9, 9)}),
        case(lambda: S.Convolution(D, kernel=(3,), num_filter=2, pad=(2,), name="op"),
             {"data": ("N", 3, 8)}),
    ],
    "Deconvolution": [
        case(lambda: S.Deconvolution(D, kernel=(3, 3), num_filter=4, stride=(2, 2), pad=(1, 1),
                                     adj=(1, 1), name="op"), {"data": ("N", 3, 5, 4)}),
        case(lambda: S.Deconvolution(D, kernel=(2, 2), num_filter=4, num_group=2, no_bias=False,
                                     name="op"), {"data": ("N", 4, 3, 3)}),
    ],
    "BatchNorm": [
        case(lambda: S.BatchNorm(D, fix_gamma=False, eps=1e-3, name="op"), {"data": ("N", 3, 4, 4)}),
        case(lambda: S.BatchNorm(D, name="op"), {"data": ("N", 5)}),      # fix_gamma=True
    ],
    "InstanceNorm": [case(lambda: S.InstanceNorm(D, eps=1e-4, name="op"), {"data": ("N", 3, 5, 4)})],
    "LayerNorm": [case(lambda: S.LayerNorm(D, eps=1e-3, name="op"), {"data": ("N", 3, 5)}),
                  case(lambda: S.LayerNorm(D, axis=1, name="op"), {"data": ("N", 4, 3)})],
    "L2Normalization": [case(lambda m=m: S.L2Normalization(D, mode=m), {"data": ("N", 3, 2, 2)})
                        for m in ("instance", "channel", "spatial")],
    "UpSampling": [case(lambda: S.UpSampling(D, scale=2, sample_type="nearest", num_args=1),
                        {"data": ("N", 2, 3, 3)}, round_trip=False)],
    "broadcast_axis": [case(lambda: S.broadcast_axis(D, axis=(1, 2), size=(3, 2)),
                            {"data": ("N", 1, 1)})],
    "LRN": [case(lambda: S.LRN(D, nsize=3, alpha=1e-3, beta=0.7, knorm=1.5, name="op"),
                 {"data": ("N", 5, 3, 3)})],
    "Pooling": [
        case(lambda: S.Pooling(D, kernel=(2, 2), stride=(2, 2), pool_type="max"),
             {"data": ("N", 2, 6, 6)}),
        case(lambda: S.Pooling(D, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg"),
             {"data": ("N", 2, 7, 7)}),
        case(lambda: S.Pooling(D, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                               count_include_pad=False), {"data": ("N", 2, 7, 7)}),
        case(lambda: S.Pooling(D, kernel=(3, 3), stride=(2, 2), pool_type="max",
                               pooling_convention="full"), {"data": ("N", 2, 8, 8)}),
        case(lambda: S.Pooling(D, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                               pooling_convention="full"), {"data": ("N", 2, 8, 8)}),
        case(lambda: S.Pooling(D, kernel=(2,), stride=(1,), pool_type="sum"), {"data": ("N", 3, 5)}),
        case(lambda: S.Pooling(D, kernel=(2, 2), stride=(2, 2), pool_type="lp", p_value=2),
             {"data": ("N", 2, 4, 4)}),
        case(lambda: S.Pooling(D, global_pool=True, kernel=(1, 1), pool_type="avg"),
             {"data": ("N", 3, 4, 5)}),
        case(lambda: S.Pooling(D, global_pool=True, kernel=(1, 1), pool_type="max"),
             {"data": ("N", 3, 4, 5)}),
        case(lambda: S.Pooling(D, global_pool=True, kernel=(1, 1), pool_type="sum"),
             {"data": ("N", 3, 4, 5)}),
    ],
    "Activation": [case(lambda t=t: S.Activation(D, act_type=t), {"data": ("N", 4, 3)})
                   for t in ("relu", "sigmoid", "tanh", "softrelu", "softsign")],
    "LeakyReLU": [
        case(lambda: S.LeakyReLU(D, act_type="leaky", slope=0.3), {"data": ("N", 4, 3)}),
        case(lambda: S.LeakyReLU(D, act_type="elu", slope=0.7), {"data": ("N", 4, 3)}),
        case(lambda: S.LeakyReLU(D, act_type="selu"), {"data": ("N", 4, 3)}),
        case(lambda: S.LeakyReLU(D, act_type="prelu", name="op"), {"data": ("N", 3, 4, 2)}),
        case(lambda: S.LeakyReLU(D, act_type="gelu"), {"data": ("N", 4, 3)}, round_trip=False),
    ],
    "softmax": [case(lambda: S.softmax(D, axis=1), {"data": ("N", 4, 3)}),
                case(lambda: S.softmax(D, temperature=2.0), {"data": ("N", 4, 3)}),
                case(lambda: S.softmax(D, dtype="float64"), {"data": ("N", 4)})],
    "log_softmax": [case(lambda: S.log_softmax(D, axis=-1), {"data": ("N", 5)})],
    "SoftmaxActivation": [case(lambda: S.SoftmaxActivation(D, mode="channel"),
                               {"data": ("N", 3, 2, 2)})],
    "SoftmaxOutput": [
        case(lambda: S.SoftmaxOutput(D, name="softmax"), {"data": ("N", 6)}),
        case(lambda: S.SoftmaxOutput(D, name="softmax"), {"data": ("N", 2, 3)}),
        case(lambda: S.SoftmaxOutput(D, preserve_shape=True, name="softmax"),
             {"data": ("N", 2, 3)}),
        case(lambda: S.SoftmaxOutput(D, multi_output=True, name="softmax"),
             {"data": ("N", 3, 4)}),
    ],
    "LinearRegressionOutput": [case(lambda: S.LinearRegressionOutput(D, name="lro"),
                                    {"data": ("N", 3)})],
    "MAERegressionOutput": [case(lambda: S.MAERegressionOutput(D, name="mae"), {"data": ("N", 3)})],
    "LogisticRegressionOutput": [case(lambda: S.LogisticRegressionOutput(D, name="lgo"),
                                      {"data": ("N", 3)})],
    "Dropout": [case(lambda: S.Dropout(D, p=0.5), {"data": ("N", 4)})],
    "BlockGrad": [case(lambda: S.BlockGrad(D), {"data": ("N", 4)})],
    "_copy": [case(lambda: S.identity(D), {"data": ("N", 4)})],
    "make_loss": [case(lambda: S.make_loss(D), {"data": ("N", 4)})],
    "Flatten": [case(lambda: S.Flatten(D), {"data": ("N", 2, 3, 2)})],
    "Reshape": [
        case(lambda: S.Reshape(D, shape=(0, -1)), {"data": ("N", 2, 3, 2)}),
        case(lambda: S.Reshape(D, shape=(0, -3, 2)), {"data": ("N", 2, 3, 2)}),
        case(lambda: S.Reshape(D, shape=(-2, 1)), {"data": ("N", 2, 3)}),
        case(lambda: S.Reshape(D, shape=(0, -4, 2, -1, 0)), {"data": ("N", 6, 2)},
             round_trip=False),
        case(lambda: S.Reshape(D, shape=(-1, 6)), {"data": ("N", 2, 3)}),
    ],
    "Concat": [case(lambda: S.Concat(D, D2, dim=1), {"data": ("N", 2, 3), "data2": ("N", 4, 3)})],
    "stack": [case(lambda: S.stack(D, D2, axis=1), {"data": ("N", 3), "data2": ("N", 3)})],
    "transpose": [case(lambda: S.transpose(D, axes=(0, 2, 1)), {"data": ("N", 2, 3)}),
                  case(lambda: S.transpose(D), {"data": ("N", 2, 3)})],
    "SwapAxis": [case(lambda: S.SwapAxis(D, dim1=1, dim2=2), {"data": ("N", 2, 3)})],
    "expand_dims": [case(lambda: S.expand_dims(D, axis=1), {"data": ("N", 3)})],
    "squeeze": [case(lambda: S.squeeze(D, axis=(1,)), {"data": ("N", 1, 3)})],
    "SliceChannel": [case(lambda: S.SliceChannel(D, num_outputs=3, axis=1), {"data": ("N", 6)}),
                     case(lambda: S.SliceChannel(D, num_outputs=2, axis=1, squeeze_axis=True),
                          {"data": ("N", 2, 3)})],
    "slice": [case(lambda: S.slice(D, begin=(None, 1), end=(None, 3)), {"data": ("N", 4)}),
              case(lambda: S.slice(D, begin=(None, None), end=(None, None), step=(1, -2)),
                   {"data": ("N", 5)}, round_trip=False)],
    "slice_axis": [case(lambda: S.slice_axis(D, axis=1, begin=1, end=None), {"data": ("N", 4)})],
    "Embedding": [case(lambda: S.Embedding(D, input_dim=7, output_dim=3, name="op"),
                       {"data": ("N", 4)}, kind="index")],
    "Cast": [case(lambda: S.Cast(D, dtype="float64"), {"data": ("N", 3)})],
    "tile": [case(lambda: S.tile(D, reps=(1, 2)), {"data": ("N", 3)})],
    "broadcast_to": [case(lambda: S.broadcast_to(D, shape=(0, 3, 4)), {"data": ("N", 1, 4)})],
    "Pad": [case(lambda: S.Pad(D, mode="constant", pad_width=(0, 0, 0, 0, 1, 2, 2, 1),
                               constant_value=0.5), {"data": ("N", 2, 3, 3)}),
            case(lambda: S.Pad(D, mode="edge", pad_width=(0, 0, 0, 0, 1, 1, 1, 1)),
                 {"data": ("N", 2, 3, 3)})],
    "_zeros": [case(lambda: S.broadcast_add(D, S._internal._zeros(shape=(1, 3))),
                    {"data": ("N", 3)})],
    "_ones": [case(lambda: S.broadcast_mul(D, S._internal._ones(shape=(2, 1), dtype="float32")),
                   {"data": ("N", 2, 3)})],
    "_full": [case(lambda: S.broadcast_sub(D, S._internal._full(shape=(3,), value=1.5)),
                   {"data": ("N", 3)})],
    "where": [case(lambda: S.where(D3, D, D2), {"data": ("N", 3), "data2": ("N", 3),
                                                "data3": ("N", 3)}, kind="cond")],
    "clip": [case(lambda: S.clip(D, a_min=-0.3, a_max=0.4), {"data": ("N", 5)})],
    "square": [case(lambda: S.square(D), {"data": ("N", 5)})],
    "rsqrt": [case(lambda: S.rsqrt(D), {"data": ("N", 5)}, domain="positive")],
    "add_n": [case(lambda: S.add_n(D, D2, D3), {"data": ("N", 3), "data2": ("N", 3),
                                                "data3": ("N", 3)})],
    "dot": [case(lambda: S.dot(D, S.Variable("w", shape=(3, 4))), {"data": ("N", 3)}),
            case(lambda: S.dot(D, S.Variable("w", shape=(4, 3)), transpose_b=True), {"data": ("N", 3)})],
    "batch_dot": [case(lambda: S.batch_dot(D, D2, transpose_b=True),
                       {"data": ("N", 2, 3), "data2": ("N", 4, 3)})],
    "RNN": [
        case(lambda m=m, b=b: S.RNN(D, state_size=4, num_layers=2, mode=m, bidirectional=b,
                                    state_outputs=True, name="rnn"),
             {"data": (5, "N", 3), "rnn_state": (2 * (1 + b), "N", 4)}
             | ({"rnn_state_cell": (2 * (1 + b), "N", 4)} if m == "lstm" else {}))
        for m in ("lstm", "gru", "rnn_tanh", "rnn_relu") for b in (False, True)],
}
for _name in ("relu", "sigmoid", "tanh", "exp", "abs", "negative", "floor", "ceil", "sin", "cos",
              "tan", "sign", "softsign", "rint"):
    CASES[_name] = [case(lambda n=_name: getattr(S, n)(D), {"data": ("N", 5)})]
for _name in ("log", "sqrt", "reciprocal"):
    CASES[_name] = [case(lambda n=_name: getattr(S, n)(D), {"data": ("N", 5)}, domain="positive")]
for _name in ("elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div", "_maximum",
              "_minimum", "_power", "_equal", "_not_equal", "_greater", "_greater_equal",
              "_lesser", "_lesser_equal"):
    CASES[_name] = [case(lambda n=_name: getattr(S._internal, n)(D, D2),
                         {"data": ("N", 4), "data2": ("N", 4)},
                         domain="positive" if _name == "_power" else "grid")]
for _name in ("broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div",
              "broadcast_maximum", "broadcast_minimum", "broadcast_power", "broadcast_equal",
              "broadcast_not_equal", "broadcast_greater", "broadcast_greater_equal",
              "broadcast_lesser", "broadcast_lesser_equal"):
    CASES[_name] = [case(lambda n=_name: getattr(S._internal, n)(D, D2),
                         {"data": ("N", 3, 4), "data2": (1, 4)},
                         domain="positive" if _name == "broadcast_power" else "grid")]
for _name in ("_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar", "_div_scalar",
              "_rdiv_scalar", "_power_scalar", "_rpower_scalar", "_maximum_scalar",
              "_minimum_scalar", "_equal_scalar", "_not_equal_scalar", "_greater_scalar",
              "_greater_equal_scalar", "_lesser_scalar", "_lesser_equal_scalar"):
    CASES[_name] = [case(lambda n=_name: getattr(S._internal, n)(D, scalar=0.5), {"data": ("N", 5)},
                         domain="positive" if "power" in _name or "rdiv" in _name else "grid")]
for _name in ("sum", "mean", "max", "min", "prod"):
    CASES[_name] = [case(lambda n=_name: getattr(S, n)(D, axis=1, keepdims=True),
                         {"data": ("N", 3, 4)}),
                    case(lambda n=_name: getattr(S, n)(D, axis=(1,), exclude=True),
                         {"data": ("N", 3, 4)}),
                    case(lambda n=_name: getattr(S, n)(D), {"data": ("N", 3)})]


def _feeds(spec, batch, seed):
    rng = np.random.RandomState(seed)
    feeds = {}
    for name, shape in spec["shapes"].items():
        shape = tuple(batch if d == "N" else d for d in shape)
        if spec["kind"] == "index":
            value = rng.randint(0, 7, shape).astype(np.float32)
        elif spec["kind"] == "cond" and name == "data3":
            value = rng.randint(0, 2, shape).astype(np.float32)
        elif spec["domain"] == "positive":
            value = rng.uniform(0.5, 2.0, shape).astype(np.float32)
        elif spec["domain"] == "grid":
            # a few distinct values, so that comparisons meet equal operands too
            value = rng.randint(-2, 3, shape).astype(np.float32) * 0.5
        else:
            value = rng.uniform(-2.0, 2.0, shape).astype(np.float32)
        feeds[name] = value
    return feeds


def _params(sym, spec):
    """RNN states and dot's weight are inputs or parameters as the case names them."""
    from onnx_helpers import random_params
    shapes = {k: tuple(2 if d == "N" else d for d in v) for k, v in spec["shapes"].items()}
    return random_params(sym, shapes)


CASE_IDS = [(op, i) for op in sorted(CASES) for i in range(len(CASES[op]))]


def test_every_translation_has_cases():
    assert sorted(CASES) == mx.onnx.get_operator_support()


@pytest.mark.parametrize("opset", [12, 13])
@pytest.mark.parametrize("op,index", CASE_IDS, ids=["%s-%d" % c for c in CASE_IDS])
def test_single_operator(op, index, opset, tmp_path):
    spec = CASES[op][index]
    sym = spec["build"]()
    args, aux = _params(sym, spec)
    check_export(sym, [_feeds(spec, 2, 1), _feeds(spec, 3, 2)], tmp_path, args, aux, opset=opset,
                 round_trip=spec["round_trip"], rtol=spec["rtol"])


@pytest.mark.parametrize("op,index", CASE_IDS, ids=["%s-%d" % c for c in CASE_IDS])
def test_two_operator_chain(op, index, tmp_path):
    """The operator's first output feeds a second operator (tanh), so that its output name,
    dtype and shape are consumed inside the graph, not only at the graph's edge."""
    spec = CASES[op][index]
    first = spec["build"]()
    head = first[0] if len(first.list_outputs()) > 1 else first
    sym = S.Activation(S.Cast(head, dtype="float32"), act_type="tanh")
    args, aux = _params(sym, spec)
    check_export(sym, [_feeds(spec, 4, 3), _feeds(spec, 1, 4)], tmp_path, args, aux,
                 round_trip=spec["round_trip"], rtol=spec["rtol"])
