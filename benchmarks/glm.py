"""GLM benchmark: same as ``vflsec bench glm`` (see python/vflsec/bench/glm/)."""
import argparse
import sys

from vflsec.bench import glm as bench
from vflsec.bench.command import add_config_arguments, run_command

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="benchmarks/glm.py", allow_abbrev=False)
    bench.add_arguments(parser)
    add_config_arguments(parser, "glm")
    sys.exit(run_command(bench, "glm", vars(parser.parse_args())))
