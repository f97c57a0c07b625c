"""``python -m vflsec.bench.he``: the same as ``vflsec bench he``."""
import sys

from . import main

sys.exit(main())
