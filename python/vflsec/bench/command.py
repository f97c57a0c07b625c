"""What every ``vflsec bench NAME`` command shares: ``--config FILE`` and
``--print-config``, and one-line errors with exit code 2 for configuration
mistakes (the convention of ``vflsec`` and ``vflsec bench``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict

from .config import BenchConfigError, shipped_config_text

__all__ = ["add_config_arguments", "run_command"]


def add_config_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    """``--config FILE`` and ``--print-config`` for the benchmark ``name`` (its
    shipped file is ``vflsec/bench/configs/<name>.toml``)."""
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help=f"run the grid of this TOML file instead of the shipped {name}.toml (start from "
                             f"--print-config); flags given on the command line override it")
    parser.add_argument("--print-config", action="store_true",
                        help=f"print the shipped {name}.toml (every variant: [full], [quick], ...) and exit")


def run_command(module: ModuleType, name: str, options: Dict[str, Any]) -> int:
    """Run ``module.run(**options)`` for ``vflsec bench name``, or print its shipped
    configuration; a configuration mistake ends the process with one line and exit code 2."""
    options = dict(options)
    if options.pop("print_config", False):
        sys.stdout.write(shipped_config_text(name))
        return 0
    try:
        module.run(**options)
    except BenchConfigError as exc:
        fix = "" if " -- " in str(exc) else f" -- edit the configuration or flag (vflsec bench {name} --print-config " \
                                             f"shows the shipped one)"
        print(f"vflsec bench {name}: error: {exc}{fix}", file=sys.stderr)
        raise SystemExit(2) from None
    return 0
