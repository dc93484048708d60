"""Module semantics as properties over random networks, configurations and optimizers.

The networks come from ``lightmod.testing.strategies.module_nets`` (per-sample layers drawn
from the operator registry, a regression head), the devices / work loads / batch sizes /
grad_req from ``module_configs``, the optimizers and their hyper-parameters from
``optimizers`` (every registered deterministic optimizer), bucket keys from ``bucket_keys``.
The expected values come from ``lightmod.testing.reference`` (one float64 executor).

tests/test_module_properties.py states the same properties for a fixed MLP; these extend them
to whatever the strategies draw. tests/mutation_check.py breaks the Module on purpose and
requires these to notice.
"""
import numpy as np
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import lightmod as mx
from lightmod import nd
from lightmod.testing import strategies as lst
from lightmod.testing._profile import settings_for
from lightmod.testing.reference import ReferenceNet

SETTINGS = settings_for(8, profile="lightmod-ci", suppress_health_check=list(HealthCheck))
RTOL, ATOL = 2e-4, 2e-5


def _params(net, seed):
    rng = np.random.default_rng(seed)
    return {n: rng.uniform(-0.5, 0.5, s) for n, s in net.param_shapes().items()}


def _batches(net, batch_size, count, seed):
    rng = np.random.default_rng(seed + 1)
    return [(rng.uniform(-1, 1, (batch_size, net.features)),
             rng.uniform(-1, 1, (batch_size, net.outputs))) for _ in range(count)]


def _module(net, config=None, **kwargs):
    kwargs.update(config.module_kwargs() if config is not None else {})
    return mx.mod.Module(net.symbol, data_names=net.data_names, label_names=net.label_names,
                         **kwargs)


def _batch(x, y, key=None, provide=False):
    data, label = [nd.array(x)], [nd.array(y)]
    if not provide:
        return mx.io.DataBatch(data, label)
    return mx.io.DataBatch(data, label, bucket_key=key,
                           provide_data=[mx.io.DataDesc("data", x.shape)],
                           provide_label=[mx.io.DataDesc("lro_label", y.shape)])


def _train(mod, net, batch_size, params, batches, optimizer):
    mod.bind(net.data_shapes(batch_size), net.label_shapes(batch_size))
    mod.init_params(arg_params={k: nd.array(v) for k, v in params.items()})
    mod.init_optimizer(optimizer=optimizer[0], optimizer_params=optimizer[1])
    for x, y in batches:
        mod.forward_backward(_batch(x, y))
        mod.update()
    mod.forward(_batch(*batches[0]), is_train=False)
    return ({k: v.asnumpy() for k, v in mod.get_params()[0].items()},
            mod.get_outputs()[0].asnumpy())


@SETTINGS
@given(net=lst.module_nets(), config=lst.module_configs(max_devices=3, batch_size=(2, 8)),
       optimizer=lst.optimizers(), seed=st.integers(0, 2 ** 16))
def test_one_context_equals_several(net, config, optimizer, seed):
    """The same training on one device and on several (any work loads, update on the kvstore
    or not) gives the same parameters and outputs, for every optimizer."""
    params = _params(net, seed)
    batches = _batches(net, config.batch_size, 2, seed)
    ref_params, ref_out = _train(_module(net), net, config.batch_size, params, batches,
                                 optimizer)
    got_params, got_out = _train(_module(net, config), net, config.batch_size, params, batches,
                                 optimizer)
    np.testing.assert_allclose(got_out, ref_out, rtol=RTOL, atol=ATOL)
    for name in ref_params:
        # compare what training changed (small steps would hide in the weights' values)
        start = params[name].astype(np.float32)
        np.testing.assert_allclose(got_params[name] - start, ref_params[name] - start,
                                   rtol=2e-3, atol=2e-6,
                                   err_msg="change of %s on %s" % (name, config))


@SETTINGS
@given(net=lst.module_nets(), config=lst.module_configs(grad_reqs=("add",)),
       count=st.integers(1, 3), seed=st.integers(0, 2 ** 16))
def test_grad_req_add_sums_the_gradients(net, config, count, seed):
    """With grad_req='add', k backward passes leave the sum of the k batch gradients."""
    params = _params(net, seed)
    ref = ReferenceNet(net.symbol, net.data_names, net.label_names)
    mod = _module(net, config)
    mod.bind(net.data_shapes(config.batch_size), net.label_shapes(config.batch_size),
             grad_req="add")
    mod.init_params(arg_params={k: nd.array(v) for k, v in params.items()})
    expected = {k: np.zeros_like(v) for k, v in params.items()}
    for x, y in _batches(net, config.batch_size, count, seed):
        mod.forward_backward(_batch(x, y))
        for k, g in ref.gradients(params, {"data": x, "lro_label": y}).items():
            expected[k] += g
    group = mod._exec_group
    for name, grads in zip(group.param_names, group.grad_arrays):
        total = sum(g.asnumpy().astype(np.float64) for g in grads)
        np.testing.assert_allclose(total, expected[name], rtol=RTOL, atol=ATOL, err_msg=name)


@SETTINGS
@given(net=lst.module_nets(), config=lst.module_configs(), sizes=st.lists(
    st.integers(1, 8), min_size=1, max_size=3), seed=st.integers(0, 2 ** 16))
def test_reshape_keeps_parameters(net, config, sizes, seed):
    """Training, then reshaping (explicitly or by a batch of another size) keeps the trained
    parameters: the outputs after each reshape are the reference's with those parameters."""
    ndev = len(config.contexts)
    params = _params(net, seed)
    ref = ReferenceNet(net.symbol, net.data_names, net.label_names)
    mod = _module(net, config)
    _train(mod, net, config.batch_size, params, _batches(net, config.batch_size, 1, seed),
           ("sgd", {"learning_rate": 0.1}))
    trained = {k: v.asnumpy().astype(np.float64) for k, v in mod.get_params()[0].items()}
    for i, size in enumerate(sizes):
        size = max(size, ndev)
        if config.work_load_list and not lst._splits(size, config.work_load_list):
            continue
        x, y = _batches(net, size, 1, seed + i)[0]
        if i % 2:
            mod.reshape(net.data_shapes(size), net.label_shapes(size))
        mod.forward(_batch(x, y), is_train=False)
        expected = ref.forward(trained, {"data": x, "lro_label": y})[0]
        np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), expected, rtol=RTOL,
                                   atol=ATOL)
        for name, value in mod.get_params()[0].items():
            np.testing.assert_array_equal(value.asnumpy(), trained[name].astype(np.float32))


@SETTINGS
@given(net=lst.module_nets(), config=lst.module_configs(max_devices=2),
       optimizer=lst.optimizers(), seed=st.integers(0, 2 ** 16))
def test_checkpoint_round_trip(tmp_path_factory, net, config, optimizer, seed):
    """save_checkpoint then Module.load (optimizer states included) computes the same and
    keeps training identically, for every optimizer."""
    prefix = str(tmp_path_factory.mktemp("ckpt") / "m")
    params = _params(net, seed)
    batches = _batches(net, config.batch_size, 3, seed)
    mod = _module(net, config)
    _train(mod, net, config.batch_size, params, batches[:2], optimizer)
    mod.save_checkpoint(prefix, 3, save_optimizer_states=True)
    loaded = mx.mod.Module.load(prefix, 3, load_optimizer_states=True,
                                data_names=net.data_names, label_names=net.label_names,
                                **config.module_kwargs())
    loaded.bind(net.data_shapes(config.batch_size), net.label_shapes(config.batch_size))
    loaded.init_optimizer(optimizer=optimizer[0], optimizer_params=optimizer[1])
    for m in (mod, loaded):
        m.forward(_batch(*batches[0]), is_train=False)
    np.testing.assert_array_equal(loaded.get_outputs()[0].asnumpy(),
                                  mod.get_outputs()[0].asnumpy())
    saved, restored = _updater(mod).states, _updater(loaded).states
    assert set(saved) == set(restored)
    for key in saved:
        _assert_same_state(restored[key], saved[key])
    if optimizer[0] in COUNTED:
        return
    for m in (mod, loaded):
        m.forward_backward(_batch(*batches[2]))
        m.update()
    a, b = mod.get_params()[0], loaded.get_params()[0]
    for name in a:
        np.testing.assert_allclose(b[name].asnumpy(), a[name].asnumpy(), rtol=1e-6, atol=1e-7,
                                   err_msg="%s after a step with %s" % (name, optimizer[0]))


# These optimizers' steps depend on the update count, which MXNet's .states files do not
# keep (a loaded module counts from 1 again), so their next step legitimately differs.
COUNTED = ("adam", "adamax", "nadam", "ftml", "lamb")


def _updater(mod):
    return mod._kvstore._updater if mod._update_on_kvstore else mod._updater


def _assert_same_state(a, b):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same_state(x, y)
    elif a is None:
        assert b is None
    else:
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def _bucketing(net, keys, grad_req="write", contexts=None):
    def sym_gen(_key):
        return net.symbol, net.data_names, net.label_names
    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=keys[0],
                                 context=contexts or mx.cpu())
    mod.bind(net.data_shapes(keys[0]), net.label_shapes(keys[0]), grad_req=grad_req)
    return mod


@SETTINGS
@given(net=lst.module_nets(), keys=lst.bucket_keys(min_size=2, max_size=3),
       steps=st.lists(st.integers(0, 2), min_size=1, max_size=4), seed=st.integers(0, 2 ** 16))
def test_buckets_share_parameters(net, keys, steps, seed):
    """Buckets (here: batches of different sizes) train one set of parameters: after updates
    in any bucket, every bucket computes with the same, current parameters -- those of one
    Module trained on the same batches in the same order."""
    params = _params(net, seed)
    bucketing = _bucketing(net, keys)
    bucketing.init_params(arg_params={k: nd.array(v) for k, v in params.items()})
    bucketing.init_optimizer(optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    single = _module(net)
    single.bind(net.data_shapes(keys[0]), net.label_shapes(keys[0]))
    single.init_params(arg_params={k: nd.array(v) for k, v in params.items()})
    single.init_optimizer(optimizer_params={"learning_rate": 0.1, "momentum": 0.9,
                                            "rescale_grad": 1.0 / keys[0]})
    for i, step in enumerate(steps):
        key = keys[step % len(keys)]
        x, y = _batches(net, key, 1, seed + i)[0]
        bucketing.forward_backward(_batch(x, y, key, provide=True))
        bucketing.update()
        single.forward_backward(_batch(x, y))
        single.update()
    expected = {k: v.asnumpy() for k, v in single.get_params()[0].items()}
    for name, value in bucketing.get_params()[0].items():
        np.testing.assert_allclose(value.asnumpy(), expected[name], rtol=RTOL, atol=ATOL,
                                   err_msg=name)
    default = bucketing._buckets[keys[0]]._exec_group
    for key in keys[1:]:
        if key not in bucketing._buckets:
            continue
        group = bucketing._buckets[key]._exec_group
        for name, mine, theirs in zip(group.param_names, group.param_arrays,
                                      default.param_arrays):
            assert mx.test_utils.same_array(mine[0], theirs[0]), \
                "bucket %s does not share %s with the default bucket" % (key, name)
    for key in keys:                    # every bucket now computes with those parameters
        x, y = _batches(net, key, 1, seed + 99)[0]
        bucketing.forward(_batch(x, y, key, provide=True), is_train=False)
        single.forward(_batch(x, y), is_train=False)
        np.testing.assert_allclose(bucketing.get_outputs()[0].asnumpy(),
                                   single.get_outputs()[0].asnumpy(), rtol=RTOL, atol=ATOL)


@SETTINGS
@given(net=lst.module_nets(), keys=lst.bucket_keys(min_size=2, max_size=3),
       seed=st.integers(0, 2 ** 16))
def test_buckets_accumulate_gradients_with_grad_req_add(net, keys, seed):
    """grad_req='add' sums the gradients of batches from different buckets in one buffer."""
    params = _params(net, seed)
    ref = ReferenceNet(net.symbol, net.data_names, net.label_names)
    bucketing = _bucketing(net, keys, grad_req="add")
    bucketing.init_params(arg_params={k: nd.array(v) for k, v in params.items()})
    expected = {k: np.zeros_like(v) for k, v in params.items()}
    for i, key in enumerate(keys):
        x, y = _batches(net, key, 1, seed + i)[0]
        bucketing.forward_backward(_batch(x, y, key, provide=True))
        for k, g in ref.gradients(params, {"data": x, "lro_label": y}).items():
            expected[k] += g
    group = bucketing._curr_module._exec_group
    for name, grads in zip(group.param_names, group.grad_arrays):
        np.testing.assert_allclose(grads[0].asnumpy(), expected[name], rtol=RTOL, atol=ATOL,
                                   err_msg=name)
