"""Mutation check: break lightmod on purpose and require the property tests to notice.

Each mutant is a small, plausible bug applied by monkeypatching, in a fresh pytest process
that runs only the tests meant to catch it; the mutant is *caught* when those tests fail.
A control run of the same tests without any mutant must pass, so a failure really comes from
the mutant. Hypothesis runs under the ``lightmod-mutation`` profile (derandomized, no
shrinking: we only need to know that something fails).

Run ``python tests/mutation_check.py [mutant ...]``: it prints one line per mutant and exits 0
when every mutant was caught (tests/test_mutation.py runs it in CI).
"""
import os
import subprocess
import sys
import time

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS_DIR)

STATE_MACHINE = "tests/test_module_state_machine.py"
PROPERTIES = "tests/test_testing_module_properties.py"


# ---------------------------------------------------------------------------------------------
# the mutants
# ---------------------------------------------------------------------------------------------
def rescale_grad_per_device():
    """init_optimizer divides the gradient by the per-device batch instead of the whole
    batch (the sum over devices then counts every sample ``num_devices`` times too much)."""
    from lightmod.module import Module
    original = Module.init_optimizer

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        if isinstance(optimizer, str) and self.binded:
            params = dict(optimizer_params)
            params.setdefault("rescale_grad",
                              len(self._context) / float(self._exec_group.batch_size))
            optimizer_params = params
        return original(self, kvstore, optimizer, optimizer_params, force_init)
    Module.init_optimizer = init_optimizer


def bucketing_copies_parameters():
    """switch_bucket binds a new bucket on its own and copies the parameters into it, instead
    of sharing the default bucket's arrays (buckets then drift apart)."""
    from lightmod.module import BucketingModule
    original = BucketingModule.switch_bucket

    def switch_bucket(self, bucket_key, data_shapes, label_shapes=None):
        if self.binded and bucket_key not in self._buckets:
            symbol, data_names, label_names = self._call_sym_gen(bucket_key)
            module = self._new_module(symbol, data_names, label_names)
            module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                        self._curr_module.inputs_need_grad, grad_req=self._grad_req)
            default = self._buckets[self._default_bucket_key]
            arg_params, aux_params = default.get_params()
            module.set_params(arg_params, aux_params)
            if default.optimizer_initialized:
                module.borrow_optimizer(default)
            self._buckets[bucket_key] = module
        return original(self, bucket_key, data_shapes, label_shapes)
    BucketingModule.switch_bucket = switch_bucket


def reshape_drops_parameters():
    """Re-shaping the executors for a new batch size leaves the parameters zero instead of
    keeping their values."""
    from lightmod.module.executor_group import DataParallelExecutorGroup
    original = DataParallelExecutorGroup.reshape

    def reshape(self, data_shapes, label_shapes):
        changed = (list(data_shapes) != list(self.data_shapes)
                   or (label_shapes is not None and self.label_shapes is not None
                       and list(label_shapes) != list(self.label_shapes)))
        original(self, data_shapes, label_shapes)
        if changed:
            for arrays in self.param_arrays:
                for array in arrays:
                    array[:] = 0
    DataParallelExecutorGroup.reshape = reshape


def wrong_gradient_elemwise_mul():
    """elemwise_mul's gradient for lhs uses lhs instead of rhs (operands swapped)."""
    from lightmod.operator import registry
    cls = type(registry.get("elemwise_mul"))
    original = cls.backward

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        original(self, p, k, out_grads, inputs, outputs, in_grads, req, state)
        if self.name == "elemwise_mul" and req[0] == "write":
            in_grads[0][...] = out_grads[0] * inputs[0]
    cls.backward = backward


class Mutant:
    def __init__(self, apply, tests):
        self.name = apply.__name__
        self.apply = apply
        self.tests = tests

    @property
    def doc(self):
        return " ".join(self.apply.__doc__.split())


MUTANTS = [
    Mutant(rescale_grad_per_device,
           [STATE_MACHINE, PROPERTIES + "::test_one_context_equals_several"]),
    Mutant(bucketing_copies_parameters,
           [PROPERTIES + "::test_buckets_share_parameters",
            PROPERTIES + "::test_buckets_accumulate_gradients_with_grad_req_add"]),
    Mutant(reshape_drops_parameters,
           [STATE_MACHINE, PROPERTIES + "::test_reshape_keeps_parameters"]),
    Mutant(wrong_gradient_elemwise_mul,
           ["tests/test_registry_ops_property.py::test_operator_from_registry[elemwise_mul]"]),
]
BY_NAME = {m.name: m for m in MUTANTS}


# ---------------------------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------------------------
# `python -c` puts the working directory (the repository root) first on sys.path, where the
# source tree would shadow the installed lightmod (whose kernels package only exists once
# installed): drop it, as the `pytest` command does.
_BOOT = """
import os, sys
sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != {root!r}]
sys.path.insert(0, {tests_dir!r})
import mutation_check, pytest
name = sys.argv[1]
if name != "none":
    mutation_check.BY_NAME[name].apply()
sys.exit(pytest.main(sys.argv[2:]))
"""


def run_tests(mutant_name, tests, timeout=300):
    """Run ``tests`` with mutant ``mutant_name`` applied ('none': unmutated); returns
    ``(exit code, names of the failed tests, seconds)``."""
    env = dict(os.environ)
    env["LIGHTMOD_HYPOTHESIS_PROFILE"] = "lightmod-mutation"
    env.setdefault("PYTHONHASHSEED", "0")
    cmd = [sys.executable, "-c", _BOOT.format(root=ROOT, tests_dir=TESTS_DIR), mutant_name,
           "-q", "-p", "no:cacheprovider", "--tb=no", "-rf"] + list(tests)
    start = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    failed = [line.split()[1] for line in proc.stdout.splitlines()
              if line.startswith("FAILED ")]
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
    return proc.returncode, failed, time.time() - start


def check(names=None, out=sys.stdout):
    """Run the control and every mutant (or those named); returns {name: caught?} with
    'control' mapped to whether the unmutated tests passed."""
    mutants = [BY_NAME[n] for n in names] if names else MUTANTS
    results = {}
    control_tests = sorted({t for m in mutants for t in m.tests})
    code, failed, secs = run_tests("none", control_tests)
    results["control"] = code == 0
    out.write("%-32s %s (%.0fs)%s\n" % ("control (no mutant)", "passes" if code == 0 else
                                        "FAILS", secs, "" if code == 0 else " " + str(failed)))
    for mutant in mutants:
        code, failed, secs = run_tests(mutant.name, mutant.tests)
        caught = code == 1 and bool(failed)
        results[mutant.name] = caught
        out.write("%-32s %s (%.0fs) %s\n" % (mutant.name, "caught" if caught else
                                             "SURVIVED (exit code %d)" % code, secs,
                                             ", ".join(f.split("::", 1)[-1] for f in failed)))
    return results


def main(argv=None):
    results = check(argv if argv else None)
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
