"""A checkpoint is one unit: SIGKILL at any instant of ``Module.save_checkpoint`` leaves, for
every epoch, either the complete new checkpoint, the complete previous one, or (first save
only) none; never params beside states of another step.

The kill test runs in a child process (one interpreter start): it forks a saver that loops over
saves of a few epochs (re-saves and new ones), with every parameter and every momentum state
set to the step number before each save, kills it at a random moment, checks what
``Module.load(prefix, epoch, load_optimizer_states=True)`` finds, and repeats.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

_KILL_CHILD = textwrap.dedent(r"""
    import json, os, random, re, signal, sys, time
    import numpy as np
    import lightmod as mx
    from lightmod.optimizer.states import loads_states

    folder, rounds, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    prefix = os.path.join(folder, "net")
    rng = random.Random(seed)
    net = mx.sym.MakeLoss(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=512, name="fc"))
    mod = mx.mod.Module(net, label_names=None)
    mod.bind([("data", (1, 512))])
    mod.init_params()
    mod.init_optimizer(optimizer="sgd", optimizer_params={"momentum": 0.9})
    mod.forward_backward(mx.io.DataBatch([mx.nd.ones((1, 512))]))
    mod.update()                       # creates the momentum states

    def save_forever(step, epochs):
        while True:
            arg, aux = mod.get_params()
            mod.set_params({k: mx.nd.full(v.shape, step) for k, v in arg.items()}, aux)
            for state in mod._updater.states.values():
                state[:] = step
            mod.save_checkpoint(prefix, rng.choice(epochs), save_optimizer_states=True)
            step += 1

    def look(epoch):
        # what a user finds: (step of the params, step of the states), or None
        try:
            loaded = mx.mod.Module.load(prefix, epoch, load_optimizer_states=True)
        except mx.MXNetError:
            return None
        values = np.concatenate([v.asnumpy().ravel() for v in loaded._arg_params.values()])
        try:
            with open(loaded._preload_opt_states, "rb") as f:
                states = loads_states(f.read())
        except OSError:
            return ("params without their states", float(values[0]), None)
        svalues = np.concatenate([s.asnumpy().ravel() for s in states.values()])
        if values.min() != values.max() or svalues.min() != svalues.max():
            return ("torn", float(values.min()), float(values.max()))
        return (float(values[0]), float(svalues[0]))

    seen = {}            # epoch -> step found at the last look
    report = {"rounds": rounds, "violations": [], "interrupted": 0}
    for r in range(rounds):
        epochs = [1, 1, 2, 3 + r]       # re-saves of 1 and 2, one new epoch per round
        pid = os.fork()
        if pid == 0:
            try:
                save_forever(1000 * (r + 1), epochs)
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0.0, 0.3))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        names = os.listdir(folder)
        if any(n.endswith((".tmp", ".prev")) for n in names):
            report["interrupted"] += 1
        for epoch in sorted(set(epochs) | set(seen)):
            found = look(epoch)
            if found is None:
                if epoch in seen:
                    report["violations"].append([r, epoch, "lost a complete checkpoint"])
                continue
            if isinstance(found[0], str) or found[0] != found[1]:
                report["violations"].append([r, epoch, "mixed", list(found), sorted(names)])
                continue
            if found[0] < seen.get(epoch, 0):
                report["violations"].append([r, epoch, "went back", found[0], seen[epoch]])
            seen[epoch] = found[0]
    report["complete_epochs"] = len(seen)
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)     # cleans every leftover
    report["leftovers"] = sorted(n for n in os.listdir(folder) if n.startswith("."))
    print(json.dumps(report))
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the kill test forks the saver")
def test_sigkill_during_save_keeps_checkpoints_whole(tmp_path):
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", LIGHTMOD_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", _KILL_CHILD, str(tmp_path), "25", "7"],
                          capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["violations"] == []
    assert report["leftovers"] == []
    # the kills did land inside saves (temporary files or backups were found), so the
    # invariant was really put to the test
    assert report["interrupted"] >= 3, report
    assert report["complete_epochs"] >= 2, report


# ---------------------------------------------------------------------------------------------
# the states that follow the write order, built by hand
# ---------------------------------------------------------------------------------------------
def _module(num_hidden=3):
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=num_hidden, name="fc")
    mod = mx.mod.Module(net, label_names=None)
    mod.bind([("data", (2, 4))])
    mod.init_params(mx.init.Constant(1.0))
    mod.init_optimizer(optimizer="adam")
    return mod


def _weight(mod):
    return mod.get_params()[0]["fc_weight"].asnumpy()


def test_interrupted_resave_loads_the_previous_checkpoint(tmp_path):
    prefix = str(tmp_path / "m")
    mod = _module()
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)
    old_states = open(prefix + "-0001.states", "rb").read()
    # a re-save killed after the backups were made and the new states written
    os.replace(prefix + "-0001.params", str(tmp_path / ".m-0001.params.prev"))
    os.replace(prefix + "-0001.states", str(tmp_path / ".m-0001.states.prev"))
    with open(prefix + "-0001.states", "wb") as f:
        f.write(b"new states of a save that never finished")
    loaded = mx.mod.Module.load(prefix, 1, load_optimizer_states=True)
    np.testing.assert_array_equal(loaded._arg_params["fc_weight"].asnumpy(), _weight(mod))
    assert open(loaded._preload_opt_states, "rb").read() == old_states
    # the next save rolls the backups back first, then writes the new checkpoint
    mod.set_params({"fc_weight": mx.nd.full((3, 4), 5.0), "fc_bias": mx.nd.zeros(3)}, {})
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)
    assert sorted(os.listdir(tmp_path)) == ["m-0001.params", "m-0001.states", "m-symbol.json"]
    _, args, _ = mx.model.load_checkpoint(prefix, 1)
    np.testing.assert_array_equal(args["fc_weight"].asnumpy(), np.full((3, 4), 5.0))


def test_save_without_states_drops_the_stale_states_file(tmp_path):
    prefix = str(tmp_path / "m")
    mod = _module()
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)
    mod.save_checkpoint(prefix, 1, save_optimizer_states=False)
    assert not os.path.exists(prefix + "-0001.states")
    with pytest.raises(MXNetError, match="has no optimizer states"):
        mx.mod.Module.load(prefix, 1, load_optimizer_states=True)


def test_leftover_temporary_files_are_removed_at_the_next_save(tmp_path):
    prefix = str(tmp_path / "m")
    stale = [".m-0003.params.%s.tmp" % ("a" * 32), ".m-symbol.json.%s.tmp" % ("b" * 32),
             ".m-0001.states.%s.tmp" % ("c" * 32)]
    other = [".other-0001.params.%s.tmp" % ("d" * 32), ".m-v2-0001.params.%s.tmp" % ("e" * 32)]
    for name in stale + other:
        (tmp_path / name).write_bytes(b"x" * 100)
    _module().save_checkpoint(prefix, 1)
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith(".")) == sorted(other)


def test_missing_checkpoint_says_which_epochs_exist(tmp_path):
    prefix = str(tmp_path / "m")
    _module().save_checkpoint(prefix, 2)
    with pytest.raises(MXNetError, match=r"epoch 7 .*m-0007\.params does not exist.*saved "
                                         r"epochs: 2"):
        mx.mod.Module.load(prefix, 7)
    with pytest.raises(MXNetError, match="no saved epoch found"):
        mx.model.load_checkpoint(str(tmp_path / "nothing"), 1)


def test_failed_write_rolls_back_to_the_previous_checkpoint(tmp_path):
    prefix = str(tmp_path / "m")
    mod = _module()
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)
    before = {n: open(os.path.join(tmp_path, n), "rb").read() for n in os.listdir(tmp_path)}

    def failing_params(fname):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        mx.model.write_checkpoint(prefix, 1, lambda f: None, failing_params,
                                  lambda f: open(f, "wb").write(b"partial"))
    after = {n: open(os.path.join(tmp_path, n), "rb").read() for n in os.listdir(tmp_path)}
    assert after == before


def test_checkpoint_files_keep_mxnet_names_and_formats(tmp_path):
    prefix = str(tmp_path / "m")
    mod = _module()
    mod.save_checkpoint(prefix, 4, save_optimizer_states=True)
    assert sorted(os.listdir(tmp_path)) == ["m-0004.params", "m-0004.states", "m-symbol.json"]
    saved = mx.nd.load(prefix + "-0004.params")
    assert sorted(saved) == ["arg:fc_bias", "arg:fc_weight"]


def test_functional_save_checkpoint_leaves_states_alone(tmp_path):
    # mx.model.save_checkpoint never writes states: a states file saved by the user stays
    prefix = str(tmp_path / "m")
    mod = _module()
    mod.save_optimizer_states(prefix + "-0002.states")
    arg, aux = mod.get_params()
    mx.model.save_checkpoint(prefix, 2, mod.symbol, arg, aux)
    mx.model.save_checkpoint(prefix, 2, mod.symbol, arg, aux)
    assert sorted(os.listdir(tmp_path)) == ["m-0002.params", "m-0002.states", "m-symbol.json"]
    loaded = mx.mod.Module.load(prefix, 2, load_optimizer_states=True)
    assert loaded._preload_opt_states == prefix + "-0002.states"
