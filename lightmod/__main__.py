"""``python -m lightmod ...``: the ``lightmod`` command (``demo``, ``info``, ``run``, ...) for
environments whose scripts folder is not on the PATH."""
import sys

from .cli import main

sys.exit(main())
