"""BucketingModule: buckets share parameters, gradients and optimizer; checkpoints; NameManager."""
import logging
import os
import warnings

import numpy as np
import pytest
from fixtures.module_nets import BucketBatches, lstm_language_model, same_array
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod import nd
from lightmod.base import NotBoundError


@pytest.fixture(autouse=True)
def _seed():
    mx.random.seed(0)
    np.random.seed(0)


def scale_net(_key):
    """sym_gen for a one-parameter net: make_loss(data * a); the gradient of a is sum(data)."""
    data = mx.sym.Variable("data")
    weight = mx.sym.Variable("a", shape=(1,), init=mx.init.One())
    return mx.sym.make_loss(mx.sym.broadcast_mul(data, weight)), ("data",), None


def scale_batch(key, batch_size=2):
    return mx.io.DataBatch(data=[nd.ones((batch_size,))], label=None,
                           provide_data=[mx.io.DataDesc(name="data", shape=(batch_size,),
                                                        layout="N")],
                           bucket_key=key)


@pytest.mark.parametrize("grad_req, expected", [("write", 2), ("add", 4)])
def test_bucket_module_grad_req(grad_req, expected):
    mod = mx.mod.BucketingModule(sym_gen=scale_net, default_bucket_key=10)
    mod.bind(data_shapes=[["data", (2,)]], for_training=True, grad_req=grad_req)
    mod.init_params()
    mod.forward_backward(scale_batch(10))
    assert mod._curr_module._exec_group.execs[0].grad_dict["a"].asscalar() == 2
    mod.forward_backward(scale_batch(5))
    assert mod._curr_module._grad_req == grad_req
    # bucket 5 shares bucket 10's gradient array: 'add' accumulates across buckets
    assert mod._curr_module._exec_group.execs[0].grad_dict["a"].asscalar() == expected


def lm_batches(keys, batch_size, vocab, seed=0):
    rng = np.random.RandomState(seed)
    out = []
    for key in keys:
        x = rng.randint(0, vocab, (batch_size, key)).astype(np.float32)
        y = np.concatenate([x[:, 1:], np.full((batch_size, 1), -1, np.float32)], axis=1)
        out.append((key, x, y))
    return out


def test_module_switch_bucket_names_and_memory():
    vocab, batch_size, default_key, test_key = 40, 4, 10, 5
    sym_gen = lstm_language_model(vocab, 8, 8, 2, named_embedding=False)
    mod = mx.mod.BucketingModule(sym_gen=sym_gen, default_bucket_key=default_key)
    mod.bind([("data", (batch_size, default_key))],
             [("softmax_label", (batch_size, default_key))], True, False)
    mod.init_params(initializer=mx.init.Xavier(factor_type="in", magnitude=2.34))
    # sym_gen ran under a fresh NameManager: the auto name restarts in every bucket
    assert mod.symbol.list_arguments()[1] == "embedding0_weight"
    mod.switch_bucket(test_key, [("data", (batch_size, test_key))],
                      [("softmax_label", (batch_size, test_key))])
    assert mod.symbol.list_arguments()[1] == "embedding0_weight"
    assert mod._curr_bucket_key == test_key
    total_before = mod._buckets[default_key]._total_exec_bytes
    assert isinstance(total_before, int)
    del mod._buckets[test_key]
    mod.switch_bucket(test_key, [("data", (batch_size, test_key))],
                      [("softmax_label", (batch_size, test_key))])
    assert mod._buckets[default_key]._total_exec_bytes == total_before


def test_buckets_share_parameters_gradients_and_optimizer():
    vocab, batch_size = 30, 3
    mod = mx.mod.BucketingModule(lstm_language_model(vocab, 6, 5, 1), default_bucket_key=6,
                                 context=[mx.cpu(0), mx.cpu(1)])
    mod.bind([("data", (batch_size, 6))], [("softmax_label", (batch_size, 6))])
    mod.init_params(initializer=mx.init.Xavier())
    mod.init_optimizer(optimizer_params={"learning_rate": 0.5})
    mod.switch_bucket(3, [("data", (batch_size, 3))], [("softmax_label", (batch_size, 3))])
    big, small = mod._buckets[6], mod._buckets[3]
    for name in small._exec_group.param_names:
        for e_big, e_small in zip(big._exec_group.execs, small._exec_group.execs):
            assert same_array(e_big.arg_dict[name], e_small.arg_dict[name])
            assert same_array(e_big.grad_dict[name], e_small.grad_dict[name])
    assert small._arg_params is big._arg_params
    assert small._optimizer is big._optimizer and small._kvstore is big._kvstore
    assert small.optimizer_initialized

    before = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    (key, x, y), = lm_batches([3], batch_size, vocab)
    batch = mx.io.DataBatch([nd.array(x)], [nd.array(y)], bucket_key=3,
                            provide_data=[mx.io.DataDesc("data", x.shape)],
                            provide_label=[mx.io.DataDesc("softmax_label", y.shape)])
    mod.forward_backward(batch)
    mod.update()
    assert mod._params_dirty
    after = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    assert not mod._params_dirty
    assert any(not np.allclose(before[k], after[k]) for k in before)
    # the default bucket sees the update made through bucket 3
    for name, devs in zip(big._exec_group.param_names, big._exec_group.param_arrays):
        np.testing.assert_allclose(devs[1].asnumpy(), after[name], rtol=1e-6)


@settings(max_examples=5, deadline=None)
@given(keys=st.lists(st.sampled_from([2, 3, 4]), min_size=1, max_size=4),
       seed=st.integers(0, 1000))
def test_bucketing_equals_separate_modules_with_shared_weights(keys, seed):
    """Training through buckets equals training one module per step on the same weights."""
    vocab, batch_size = 12, 2
    sym_gen = lstm_language_model(vocab, 4, 3, 1)
    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=4)
    mod.bind([("data", (batch_size, 4))], [("softmax_label", (batch_size, 4))])
    mod.init_params(initializer=mx.init.Uniform(0.3))
    mod.init_optimizer(optimizer_params={"learning_rate": 0.2})
    weights = {k: v.copy() for k, v in mod.get_params()[0].items()}
    batches = lm_batches(keys, batch_size, vocab, seed)
    for key, x, y in batches:
        mod.forward_backward(mx.io.DataBatch(
            [nd.array(x)], [nd.array(y)], bucket_key=key,
            provide_data=[mx.io.DataDesc("data", x.shape)],
            provide_label=[mx.io.DataDesc("softmax_label", y.shape)]))
        mod.update()

    for key, x, y in batches:
        sym, dn, ln = sym_gen(key)
        single = mx.mod.Module(sym, dn, ln)
        single.bind([("data", x.shape)], [("softmax_label", y.shape)])
        single.init_params(arg_params=weights, allow_missing=False)
        single.init_optimizer(optimizer_params={"learning_rate": 0.2})
        single.forward_backward(mx.io.DataBatch([nd.array(x)], [nd.array(y)]))
        single.update()
        weights = {k: v.copy() for k, v in single.get_params()[0].items()}
    final = mod.get_params()[0]
    for k in weights:
        np.testing.assert_allclose(final[k].asnumpy(), weights[k].asnumpy(), rtol=1e-5,
                                   atol=1e-6)


def test_bucketing_save_load_and_continue(tmp_path):
    prefix = str(tmp_path / "bucket")
    vocab, batch_size, default_key = 25, 4, 6
    sym_gen = lstm_language_model(vocab, 6, 6, 2)
    batches = lm_batches([6, 3, 6, 4, 3, 6], batch_size, vocab)
    train = BucketBatches(batches, batch_size, default_key)

    mod = mx.mod.BucketingModule(sym_gen=sym_gen, default_bucket_key=default_key)
    mod.fit(train, num_epoch=2, kvstore="device", optimizer="sgd",
            optimizer_params={"learning_rate": 0.1}, initializer=mx.init.Xavier(),
            eval_metric=mx.metric.Perplexity(-1),
            batch_end_callback=mx.callback.Speedometer(batch_size, 2))
    mod.save_checkpoint(prefix, 2)
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["bucket-0002.params", "bucket.buckets"] +
        ["bucket-%d-symbol.json" % k for k in (6, 3, 4)])

    loaded = mx.mod.BucketingModule.load(prefix, 2, sym_gen=sym_gen,
                                         default_bucket_key=default_key)
    assert sorted(int(k) for k in loaded._buckets) == [3, 4, 6]
    assert loaded.params_initialized and not loaded.binded
    loaded.bind(data_shapes=train.provide_data, label_shapes=train.provide_label,
                for_training=True)
    saved = mod.get_params()[0]
    got = loaded.get_params()[0]
    assert set(saved) == set(got)
    for k in saved:
        np.testing.assert_array_equal(saved[k].asnumpy(), got[k].asnumpy())
    loaded.fit(train, num_epoch=3, begin_epoch=2, kvstore="device",
               optimizer_params={"learning_rate": 0.1}, eval_metric=mx.metric.Perplexity(-1))


def test_bucketing_load_dict():
    sym_gen = lstm_language_model(10, 4, 4, 1)
    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=5)
    mod.bind([("data", (2, 5))], [("softmax_label", (2, 5))])
    mod.init_params(initializer=mx.init.Uniform(0.2))
    arg, aux = mod.get_params()
    sym_dict = {k: sym_gen(k)[0] for k in (5, 2)}
    other = mx.mod.BucketingModule.load_dict(sym_dict, sym_gen=sym_gen, default_bucket_key=5,
                                             arg_params=arg, aux_params=aux)
    other.bind([("data", (2, 5))], [("softmax_label", (2, 5))])
    for k, v in other.get_params()[0].items():
        np.testing.assert_array_equal(v.asnumpy(), arg[k].asnumpy())
    with pytest.raises(ValueError):
        mx.mod.BucketingModule.load_dict(None, sym_gen=sym_gen, default_bucket_key=5,
                                         arg_params=arg, aux_params=aux)


def test_bucket_module_ctx_group():
    num_hidden, batch_size = 4, 2

    def sym_gen(seq_len):
        with mx.AttrScope(ctx_group="stage1"):
            data = mx.sym.Variable("data")
            weight = mx.sym.Variable("stage1_weight")
            bias = mx.sym.Variable("stage1_bias")
            steps = mx.sym.SliceChannel(data, num_outputs=seq_len, axis=1, squeeze_axis=1)
            hidden = [mx.sym.FullyConnected(s, weight=weight, bias=bias,
                                            num_hidden=num_hidden) for s in steps]
        with mx.AttrScope(ctx_group="stage2"):
            w2 = mx.sym.Variable("stage2_weight")
            b2 = mx.sym.Variable("stage2_bias")
            out = mx.sym.FullyConnected(mx.sym.Concat(*hidden, dim=1), weight=w2, bias=b2,
                                        num_hidden=3)
            out = mx.sym.SoftmaxOutput(out, name="softmax")
        return out, ("data",), ("softmax_label",)

    mod = mx.mod.BucketingModule(sym_gen=sym_gen, default_bucket_key=5, context=[mx.cpu(0)],
                                 group2ctxs=[{"stage1": mx.cpu(1), "stage2": mx.cpu(2)}])
    mod.bind(data_shapes=[["data", (batch_size, 5, 3)]],
             label_shapes=[["softmax_label", (batch_size,)]], for_training=True,
             inputs_need_grad=True)
    assert mod.binded
    mod.init_params()
    execs = mod._curr_module._exec_group.execs
    assert execs[0].arg_dict["stage1_weight"].context == mx.cpu(1)
    assert execs[0].arg_dict["stage2_weight"].context == mx.cpu(2)


def test_bucketing_lifecycle_and_rebind(caplog):
    mod = mx.mod.BucketingModule(scale_net, default_bucket_key=10)
    assert list(mod.data_names) == ["data"]
    with pytest.raises(NotBoundError):
        _ = mod.symbol
    with pytest.raises(NotBoundError):
        mod.init_params()
    with pytest.raises(ValueError):
        mx.mod.BucketingModule(scale_net)
    mod.bind(data_shapes=[["data", (2,)]])
    with pytest.raises(ValueError, match="shared_module"):
        mod.bind(data_shapes=[["data", (2,)]], force_rebind=True,
                 shared_module=mx.mod.Module(scale_net(0)[0], label_names=None))
    mod = mx.mod.BucketingModule(scale_net, default_bucket_key=10)
    mod.bind(data_shapes=[["data", (2,)]])
    mod.init_params()
    mod.set_params({"a": nd.array([3.0])}, {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod.init_params()          # silently ignored, unlike Module
    mod.forward(scale_batch(5))
    assert set(mod._buckets) == {10, 5}
    with caplog.at_level(logging.WARNING):
        mod.bind(data_shapes=[["data", (2,)]])
    assert "Already bound" in caplog.text
    mod.bind(data_shapes=[["data", (2,)]], force_rebind=True)
    assert set(mod._buckets) == {10}          # force_rebind drops every bucket...
    assert mod.get_params()[0]["a"].asscalar() == 3.0    # ...but keeps the parameters


def test_bucketing_prepare_switches_back_and_installs_monitor():
    mod = mx.mod.BucketingModule(scale_net, default_bucket_key=10)
    mod.bind(data_shapes=[["data", (2,)]])
    mod.init_params()
    mon = mx.mon.Monitor(1)
    mod.install_monitor(mon)
    mod.prepare(scale_batch(7))
    assert mod._curr_bucket_key == 10 and 7 in mod._buckets
    assert len(mon.exes) == 2      # the new bucket got the monitor too


def test_bucketing_output_and_shape_properties():
    mod = mx.mod.BucketingModule(scale_net, default_bucket_key=10)
    with mx.name.NameManager():
        assert mod.output_names == scale_net(10)[0].list_outputs()
    mod.bind(data_shapes=[["data", (2,)]])
    mod.init_params()
    assert mod.data_shapes[0].shape == (2,)
    assert mod.label_shapes is None
    mod.forward(scale_batch(10), is_train=False)
    assert mod.get_outputs()[0].shape == (2,)
    assert mod.output_shapes[0][1] == (2,)
