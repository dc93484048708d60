"""Launching a grid-stride kernel of this half over n items."""
from .memory import launch_config

__all__ = []


def launch(kernel, n, *args):
    """Run ``kernel(*args)`` with the grid :func:`memory.launch_config` gives n items (nothing
    to launch for none)."""
    if n:
        kernel[launch_config(n)](*args)
