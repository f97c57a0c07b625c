"""Split-learning benchmark: same as ``vflsec bench splitnn`` (see vflsec/bench/splitnn.py)."""
import argparse
import sys

from vflsec.bench.splitnn import add_arguments, run

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="benchmarks/splitnn.py")
    add_arguments(parser)
    run(**vars(parser.parse_args()))
    sys.exit(0)
