"""bench/bench_gpu.py --tiny runs every code path of the GPU benchmark on the simulator (its
numbers mean nothing there; on a GPU the script measures for real)."""
import importlib.util
import json
import os

import numpy as np
import pytest

from lightmod.kernels import cuda_support

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not cuda_support.simulator_enabled(),
                                 reason="--tiny is for the simulator (NUMBA_ENABLE_CUDASIM=1)")]

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "bench", "bench_gpu.py")


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_gpu", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tiny_run_prints_the_table(tmp_path, capsys):
    bench = _load_bench()
    path = str(tmp_path / "gpu.json")
    results = bench.main(["--tiny", "--no-torch", "--json", path])
    printed = capsys.readouterr().out
    assert printed.startswith("GPU: numba CUDA simulator (--tiny")
    for row in ("device copy GB/s", "device triad GB/s", "sgd_momentum update GB/s",
                "adam update GB/s", "MLP train samples/s", "LeNet train samples/s",
                "LSTM train samples/s"):
        assert row in printed
    assert "PyTorch reference skipped: --no-torch" in printed
    assert json.load(open(path)) == json.loads(json.dumps(results))
    assert set(results["models"]) == {"MLP", "LeNet", "LSTM"}
    for value in [results["copy_GBs"], results["triad_GBs"], results["sgd_momentum_GBs"],
                  results["adam_GBs"]] + [m["lightmod"] for m in results["models"].values()]:
        assert np.isfinite(value) and value > 0


def test_torch_models_match_the_lightmod_ones():
    bench = _load_bench()
    torch = pytest.importorskip("torch")
    cfg = dict(bench.TINY)
    x = {"MLP": torch.rand(4, 12), "LeNet": torch.rand(1, 1, 10, 10),
         "LSTM": torch.randint(0, 6, (2, 2))}
    for case in bench.model_cases(cfg):
        out = bench.torch_model(torch, case, cfg)(x[case[0]])
        assert out.shape[-1] == case[4]


def test_tiny_conv_section(tmp_path, capsys):
    """--conv --tiny: every layer and pass on both lightmod paths, the SGEMM row, the JSON."""
    bench = _load_bench()
    path = str(tmp_path / "conv.json")
    results = bench.main(["--tiny", "--conv", "--no-torch", "--json", path])
    printed = capsys.readouterr().out
    assert printed.startswith("GPU: numba CUDA simulator (--tiny")
    assert "SGEMM 16^3" in printed and "PyTorch reference skipped: --no-torch" in printed
    assert json.load(open(path)) == json.loads(json.dumps(results))
    conv = results["conv"]
    assert conv["sgemm"]["lightmod"] > 0
    assert set(conv["layers"]) == {layer[0] for layer in bench.CONV_LAYERS_TINY}
    for name, entry in conv["layers"].items():
        for what in bench.CONV_PASSES:
            assert "%s %s" % (name, what) in printed
            for path_name in bench.CONV_PATHS:
                assert np.isfinite(entry[path_name][what]) and entry[path_name][what] > 0
        # the two paths compute the same forward
        assert entry["paths_max_difference"] < 1e-5
    assert "models" not in results
