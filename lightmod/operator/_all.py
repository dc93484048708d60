"""Imports every operator family so that its declarations register (one line per family)."""
# Families register on import; keep one line per file of lightmod/operator/.
