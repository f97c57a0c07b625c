"""GLM benchmark: same as ``vflsec bench glm`` (see python/vflsec/bench/glm/)."""
import argparse
import sys

from vflsec.bench.glm import add_arguments, run

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="benchmarks/glm.py")
    add_arguments(parser)
    run(**vars(parser.parse_args()))
    sys.exit(0)
