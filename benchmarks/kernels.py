"""Kernel benchmark: same as ``vflsec bench kernels`` (see vflsec/bench/kernels.py)."""
import sys

from vflsec.bench.kernels import main

if __name__ == "__main__":
    sys.exit(main())
