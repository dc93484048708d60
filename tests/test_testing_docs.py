"""docs/property_testing.md: its Python blocks, run in order as one script, work."""
import os
import re

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                   "property_testing.md")


def python_blocks():
    with open(DOC) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)


def test_property_testing_page_runs(monkeypatch):
    # reproducible examples: the page's settings_for() calls follow this variable
    monkeypatch.setenv("LIGHTMOD_HYPOTHESIS_PROFILE", "lightmod-ci")
    previous = settings.get_current_profile_name()
    blocks = python_blocks()
    assert len(blocks) >= 6
    namespace = {"__name__": "property_testing_doc"}
    try:
        for block in blocks:
            exec(compile(block, DOC, "exec"), namespace)
        # the lifecycle example only defines a TestCase; run its machine briefly
        from lightmod.testing._profile import settings_for
        run_state_machine_as_test(namespace["MyModelLifecycle"],
                                  settings=settings_for(3, stateful_step_count=8))
    finally:
        settings.load_profile(previous)     # the page loads a profile globally
