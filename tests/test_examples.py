"""Every example runs as a user would run it and asserts it learned something."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = ["mlp_digits.py", "multi_context.py", "resume_checkpoint.py",
            "load_mxnet_checkpoint.py", "lstm_bucketing.py", "lenet_digits.py",
            "autograd_digits.py"]


@pytest.mark.parametrize("script", EXAMPLES)
def test_example_runs(script, tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", script)],
                          capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
