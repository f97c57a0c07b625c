"""The ``vflsec`` command line: ``vflsec bench <name> [options]``."""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

# name -> module under vflsec.bench exposing add_arguments(parser) and run(**args)
BENCHMARKS = {
    "kernels": "vflsec.bench.kernels",
    "glm": "vflsec.bench.glm",
    "splitnn": "vflsec.bench.splitnn",
    "privacy": "vflsec.bench.privacy",
}


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vflsec", description="Secure compute for vertical federated learning.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    bench = sub.add_parser("bench", help="run a benchmark and write its results")
    bench_sub = bench.add_subparsers(dest="benchmark", required=True)
    for name, module_name in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        p = bench_sub.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0])
        module.add_arguments(p)
        p.set_defaults(_module=module)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from . import __version__

        print(__version__)
        return 0
    if args.command != "bench":
        parser.print_help()
        return 2
    options = {k: v for k, v in vars(args).items() if k not in ("command", "benchmark", "_module", "version")}
    args._module.run(**options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
