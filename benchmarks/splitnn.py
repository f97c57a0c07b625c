"""Split-learning benchmark: same as ``vflsec bench splitnn`` (see vflsec/bench/splitnn.py)."""
import argparse
import sys

from vflsec.bench import splitnn as bench
from vflsec.bench.command import add_config_arguments, run_command

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="benchmarks/splitnn.py", allow_abbrev=False)
    bench.add_arguments(parser)
    add_config_arguments(parser, "splitnn")
    sys.exit(run_command(bench, "splitnn", vars(parser.parse_args())))
