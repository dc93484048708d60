"""Operator declarations (one file per family); see registry.py for the conventions."""
from .registry import get, find, all_ops  # noqa: F401
