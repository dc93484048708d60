"""mx.viz: print_summary's table and plot_network's graphviz graph."""
import pytest

import lightmod as mx
from lightmod.base import MXNetError


def _lenet_like():
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, kernel=(3, 3), num_filter=4, name="conv1")
    net = mx.sym.BatchNorm(net, name="bn1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    net = mx.sym.Flatten(net, name="flat")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc1")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def test_summary_counts_parameters_and_shapes(capsys):
    total = mx.viz.print_summary(_lenet_like(), shape={"data": (1, 1, 8, 8)})
    out = capsys.readouterr().out
    # conv 4*1*3*3 + 4, bn gamma/beta/moving mean/var 4*4, fc 10*36 + 10
    assert total == 40 + 16 + 370
    assert "conv1(Convolution)" in out and "4x6x6" in out
    assert "fc1(FullyConnected)" in out and "1x10" in out
    assert "Total params: %d" % total in out


def test_summary_rows_without_shapes_and_bad_shape_argument():
    rows = mx.viz.summary_rows(_lenet_like())
    assert [r[0] for r in rows] == ["conv1", "bn1", "relu1", "pool1", "flat", "fc1", "softmax"]
    assert all(r[2] == () and r[3] == 0 for r in rows)
    with pytest.raises(MXNetError, match="shape must be a dict"):
        mx.viz.print_summary(_lenet_like(), shape=[(1, 1, 8, 8)])


def test_plot_network_gives_dot_source_without_the_dot_program():
    pytest.importorskip("graphviz")
    dot = mx.viz.plot_network(_lenet_like(), shape={"data": (1, 1, 8, 8)})
    src = dot.source
    assert "Convolution" in src and "FullyConnected" in src and "Pooling" in src
    assert "conv1_weight" not in src  # weights hidden by default
    assert "4x6x6" in src            # edges labelled with shapes
    shown = mx.viz.plot_network(_lenet_like(), hide_weights=False).source
    assert "conv1_weight" in shown


def test_plot_network_warns_about_repeated_node_names():
    pytest.importorskip("graphviz")
    import warnings
    twice = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=4, name="dense")
    twice = mx.sym.FullyConnected(mx.sym.Activation(twice, act_type="relu", name="act"),
                                  num_hidden=2, name="dense")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mx.viz.plot_network(twice, shape={"data": (3, 5)})
    messages = [str(w.message) for w in caught if w.category is RuntimeWarning]
    assert len(messages) == 1 and "multiple variables with the same name" in messages[0]
    assert "dense" in messages[0] and "dense_weight" in messages[0] and "act" not in messages[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mx.viz.plot_network(_lenet_like(), shape={"data": (1, 1, 8, 8)})
    assert not [w for w in caught if w.category is RuntimeWarning]
