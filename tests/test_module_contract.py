"""The Module contract (docs/module_contract.md) as properties, on lightmod's own Module and
BucketingModule and, through the conformance kit, on the seed documents' user subclasses.

Each property of lightmod.testing.contract runs here as its own test; tests/mutation_check.py
plants a bug for every contract line and requires these properties to notice.
"""
import numpy as np
import pytest
from fixtures.seed_modules import DetModule as SeedDetModule
from fixtures.seed_modules import OldModule

import lightmod as mx
from lightmod.testing import contract

PROPERTIES = contract.build_properties(max_examples=8)


@pytest.mark.parametrize("name", sorted(PROPERTIES))
def test_contract_property(name):
    PROPERTIES[name]()


def test_every_contract_line_is_documented():
    """docs/module_contract.md names every property, and every property it names exists."""
    import os
    import re
    path = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "module_contract.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    named = set(re.findall(r"`([a-z_]+)`", text))
    missing = set(contract.property_names()) - named
    assert not missing, "properties not in docs/module_contract.md: %s" % sorted(missing)


def make_det_module(symbol, data_names, label_names, context, fixed_param_names=None):
    # the seed's DetModule freezes parameters by name fragment: a full name is a fragment
    return SeedDetModule(symbol, data_names=data_names, label_names=label_names,
                         context=context, fixed_param=fixed_param_names,
                         logger=contract.QUIET)


def test_seed_det_module_keeps_the_contract():
    """Every line but fit() on one device (below), which the seed's own fit() breaks."""
    names = [n for n in contract.property_names() if n != "fit_runs_the_epochs"]
    passed = contract.check_module_contract(make_det_module, names=names,
                                            unsupported=("work_load_list",), max_examples=4)
    assert "devices_equal_one" not in passed
    assert len(passed) == len(contract.CONTRACT) - 3   # no work loads, no buckets, no fit


def test_kit_finds_the_seed_det_module_fit_bug():
    """The seed's DetModule.fit reads ``self._kvstore.rank`` before calling the epoch-end
    callbacks; on one device there is no kvstore (on MXNet as here), so fit() with an
    epoch_end_callback fails with AttributeError on one device. The kit reports it."""
    with pytest.raises(AssertionError, match="fit_runs_the_epochs.*rank"):
        contract.check_module_contract(make_det_module, names=["fit_runs_the_epochs"],
                                       max_examples=2)


def test_seed_old_module_keeps_the_contract():
    passed = contract.check_module_contract(contract.module_factory(OldModule),
                                            max_examples=4)
    assert len(passed) == len(contract.CONTRACT) - 1      # no buckets


class StaleModule(mx.mod.Module):
    """A subclass that forgets to mark its cached parameters stale after an update."""

    def update(self):
        super().update()
        self._params_dirty = False


def test_kit_catches_a_broken_subclass_with_a_counterexample():
    with pytest.raises(AssertionError) as caught:
        contract.check_module_contract(contract.module_factory(StaleModule),
                                       names=["get_params_after_update"], max_examples=4)
    message = str(caught.value)
    assert "get_params_after_update" in message
    # the counterexample hypothesis found: the drawn network, batch size and seed
    assert "ContractNet(" in message and "seed=" in message


def test_kit_leaves_out_what_a_factory_cannot_do():
    names = set(contract.build_properties(contract.module_factory(),
                                          unsupported=("fixed_param_names",)))
    assert "fixed_params_stay" not in names
    assert "buckets_share_parameters_and_optimizer" not in names   # no bucketing factory
    assert "forward_mode_follows_for_training" in names


def test_contract_net_reference_matches_a_hand_computed_layer():
    """The networks the properties draw compute what their layers say (a check on the
    checker): fc1 -> tanh -> head on known weights."""
    net = contract.ContractNet(features=2, hidden=2, outputs=1, act="tanh")
    args = {"fc1_weight": np.array([[1, 0], [0, 2]], np.float32),
            "fc1_bias": np.array([0.5, -0.5], np.float32),
            "head_weight": np.array([[1, -1]], np.float32),
            "head_bias": np.array([0.25], np.float32)}
    x = np.array([[0.1, 0.2]], np.float32)
    from lightmod.testing.reference import ReferenceNet
    out = ReferenceNet(net.symbol, net.data_names, net.label_names).forward(
        args, {"data": x, "lro_label": np.zeros((1, 1))})[0]
    hidden = np.tanh(x @ args["fc1_weight"].T + args["fc1_bias"])
    np.testing.assert_allclose(out, hidden @ args["head_weight"].T + args["head_bias"],
                               rtol=1e-6)
