"""Property-based testing of lightmod code with hypothesis.

Submodules (each imports hypothesis; ``import lightmod`` imports none of them):

* :mod:`lightmod.testing.strategies` -- shapes, broadcastable shape sets, dtypes, contexts,
  NDArrays, random well-formed symbols, data iterators and batches, optimizers with their
  hyper-parameters, Module configurations.
* :mod:`lightmod.testing.operators` -- valid attributes and input shapes for any registered
  operator, derived from its registry declaration (``op_cases``), and ``check_op_case``,
  which runs one case through the executor, the imperative path and a numeric gradient.
* :mod:`lightmod.testing.module_machine` -- ``ModuleStateMachine``, a hypothesis
  ``RuleBasedStateMachine`` that drives a Module through its lifecycle and checks MXNet's rules
  after every step against a numpy model of the network.
* :mod:`lightmod.testing.contract` -- the Module contract (docs/module_contract.md) as
  properties over generated networks, and ``check_module_contract(make_module)``, which runs
  them against your own Module class.

Importing any of them registers the hypothesis profiles ``lightmod`` (no deadline, because
the first call of a kernel compiles it) and ``lightmod-ci`` (the same, derandomized, with no
example database, for reproducible CI runs). ``load_profile()`` activates one.

The attributes below are looked up lazily, so ``import lightmod.testing`` stays cheap until
one of them is used.
"""
import importlib

_SUBMODULES = ("strategies", "operators", "op_hints", "module_machine", "reference",
               "contract")
_EXPORTS = {
    "load_profile": "_profile",
    "settings_for": "_profile",
    "op_cases": "operators",
    "check_op_case": "operators",
    "OpCase": "operators",
    "ModuleStateMachine": "module_machine",
    "check_module_contract": "contract",
}


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module("." + name, __name__)
    if name in _EXPORTS:
        module = importlib.import_module("." + _EXPORTS[name], __name__)
        return getattr(module, name)
    raise AttributeError("module 'lightmod.testing' has no attribute %r" % (name,))


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES) | set(_EXPORTS))
