"""The profiler records operator events and numba compile time separately, as Chrome trace JSON."""
import json

import pytest

from lightmod import profiler
from lightmod.base import MXNetError


@pytest.fixture(autouse=True)
def _clean():
    profiler.dumps(reset=True)
    yield
    profiler.set_state("stop")
    profiler.dumps(reset=True)


def test_compile_time_is_recorded_apart_from_run_time(tmp_path):
    from numba import njit

    @njit
    def add_one(x):
        return x + 1

    profiler.set_config(filename=str(tmp_path / "trace.json"))
    profiler.set_state("run")
    with profiler.scope("first-call", "forward"):
        add_one(1)
    with profiler.scope("second-call", "forward"):
        add_one(2)
    profiler.dump()
    trace = json.loads((tmp_path / "trace.json").read_text())
    events = {(e["cat"], e["name"]): e for e in trace["traceEvents"]}
    compiles = [e for e in trace["traceEvents"] if e["cat"] == "compile"]
    assert compiles and "add_one" in compiles[0]["name"]
    first = events[("forward", "first-call")]
    # the compile time was moved out of the op's own duration
    assert first["args"]["compile_ms"] > 0
    assert first["dur"] < compiles[0]["dur"]
    assert trace["otherData"]["compile_seconds"] > 0
    assert profiler.state() == "stop"


def test_nothing_recorded_when_stopped_or_paused():
    with profiler.scope("ignored"):
        pass
    profiler.set_state("run")
    profiler.pause()
    with profiler.scope("paused"):
        pass
    profiler.resume()
    with profiler.scope("kept", "user"):
        pass
    table = profiler.dumps()
    assert "kept" in table and "paused" not in table and "ignored" not in table


def test_domain_objects_and_aggregate_table():
    profiler.set_state("run")
    domain = profiler.Domain("train")
    task = domain.new_task("step")
    for _ in range(3):
        with task:
            pass
    counter = domain.new_counter("batches", 0)
    counter += 2
    domain.new_marker("epoch").mark()
    stats = json.loads(profiler.dumps(format="json"))
    assert stats["Time"]["train:task"]["step"]["Count"] == 3
    assert counter.value == 2


def test_aggregate_json_layout_and_order_follow_mxnet():
    # MXNet 1.9.1 (test_profiler.py::test_aggregate_stats_valid_json_return / _sorting):
    # {"Time": {category: {name: {Count, Total, Min, Max, Avg}}}, "Memory": {}, "Unit": {}},
    # each category's entries ordered by sort_by / ascending
    from collections import OrderedDict
    profiler.set_state("run")
    domain = profiler.Domain("work")
    for name, repeats in (("once", 1), ("thrice", 3), ("twice", 2)):
        task = domain.new_task(name)
        for _ in range(repeats):
            with task:
                pass
    profiler.set_state("stop")
    stats = json.loads(profiler.dumps(format="json"))
    assert set(stats) == {"Time", "Memory", "Unit"}
    assert stats["Unit"] == {"Time": "ms", "Memory": "kB"}
    entry = stats["Time"]["work:task"]["twice"]
    assert set(entry) == {"Count", "Total", "Min", "Max", "Avg"} and entry["Count"] == 2
    assert entry["Min"] <= entry["Avg"] <= entry["Max"]
    assert abs(entry["Total"] - 2 * entry["Avg"]) < 1e-9
    for ascending in (False, True):
        ordered = json.loads(profiler.dumps(format="json", sort_by="count", ascending=ascending),
                             object_pairs_hook=OrderedDict)
        counts = [e["Count"] for e in ordered["Time"]["work:task"].values()]
        assert counts == sorted(counts, reverse=not ascending)


def test_bad_arguments_are_refused():
    with pytest.raises(MXNetError, match="unknown option"):
        profiler.set_config(not_an_option=1)
    with pytest.raises(MXNetError, match="'run' or 'stop'"):
        profiler.set_state("go")
    with pytest.raises(MXNetError, match="sort_by"):
        profiler.dumps(sort_by="name")
    with pytest.raises(MXNetError, match="before it was started"):
        profiler.Domain("d").new_task("t").stop()


def test_executor_records_forward_and_backward_per_operator(tmp_path):
    import numpy as np

    import lightmod as mx
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    net = mx.sym.Activation(net, act_type="relu", name="act")
    exe = net.simple_bind(mx.cpu(), data=(4, 5))
    exe.arg_dict["data"][:] = np.ones((4, 5))
    profiler.set_config(filename=str(tmp_path / "trace.json"))
    profiler.set_state("run")
    exe.forward(is_train=True)
    exe.backward([mx.nd.ones((4, 3))])
    profiler.dump()
    names = {(e["cat"], e["name"]) for e in json.loads((tmp_path / "trace.json").read_text())
             ["traceEvents"]}
    assert {("forward", "fc"), ("forward", "act"), ("backward", "act_backward"),
            ("backward", "fc_backward")} <= names
    # stopped: running the executor records nothing more
    before = profiler.dumps(format="json")
    exe.forward()
    assert profiler.dumps(format="json") == before
