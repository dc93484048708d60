"""Imports every operator family so that its declarations register (one line per family)."""
# Families register on import; keep one line per file of lightmod/operator/.
from . import elemwise  # noqa: F401,E402
