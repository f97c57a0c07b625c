"""The ``vflsec`` command line: ``vflsec bench <name> [options]``, ``vflsec
party --config party.toml``, ``vflsec certs init``, ``vflsec party-data`` and ``vflsec
link-relay``."""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

# name -> module under vflsec.bench exposing add_arguments(parser) and run(**args)
BENCHMARKS = {
    "kernels": "vflsec.bench.kernels",
    "glm": "vflsec.bench.glm",
    "network": "vflsec.bench.network",
    "splitnn": "vflsec.bench.splitnn",
    "privacy": "vflsec.bench.privacy",
    "he": "vflsec.bench.he",
}


def _build_parser() -> argparse.ArgumentParser:
    from .bench.command import add_config_arguments

    parser = argparse.ArgumentParser(prog="vflsec", description="Secure compute for vertical federated learning.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    bench = sub.add_parser("bench", help="run a benchmark and write its results")
    bench_sub = bench.add_subparsers(dest="benchmark", required=True)
    for name, module_name in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        # allow_abbrev=False: "--seed" must never be taken as a prefix of another option.
        p = bench_sub.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0], allow_abbrev=False)
        module.add_arguments(p)
        add_config_arguments(p, name)
        p.set_defaults(_module=module)
    _add_network_commands(sub)
    return parser


def _add_network_commands(sub) -> None:
    party = sub.add_parser("party", help="run one party of a federated job (gRPC, mutual TLS)")
    party.add_argument("--config", required=True, help="the party's TOML configuration")
    party.add_argument("--resume", action="store_true", help="continue from the last common checkpoint")
    party.add_argument("--insecure", action="store_true",
                       help="plaintext transport without authentication (development only; warns)")
    party.add_argument("--quiet", action="store_true", help="log warnings and errors only")
    certs = sub.add_parser("certs", help="certificates for mutual TLS")
    certs_sub = certs.add_subparsers(dest="certs_command", required=True)
    init = certs_sub.add_parser("init", help="create a development CA and party certificates")
    init.add_argument("--dir", default="certs", help="output folder (default: certs)")
    init.add_argument("--parties", required=True, help="comma-separated party names")
    init.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    init.add_argument("--force", action="store_true", help="replace existing CA and certificates")
    relay = sub.add_parser("link-relay", help="relay TCP connections over an emulated link (bandwidth, RTT)")
    from .federation.link_relay import add_arguments as add_link_relay_arguments

    add_link_relay_arguments(relay)
    data = sub.add_parser("party-data", help="write per-party CSVs (ID column, shuffled, partly "
                                             "overlapping rows) from a dataset")
    from .runtime.party_data import add_arguments as add_party_data_arguments

    add_party_data_arguments(data)


def _run_network_command(args) -> int:
    if args.command == "party":
        from .runtime.party import main as party_main

        if args.insecure:
            print("vflsec party: WARNING: --insecure: plaintext transport, peers are NOT authenticated",
                  file=sys.stderr)
        return party_main(args.config, resume=args.resume, insecure=args.insecure, quiet=args.quiet)
    if args.command == "certs":
        from .federation.tls import init_certificates

        parties = [p.strip() for p in args.parties.split(",") if p.strip()]
        paths = init_certificates(args.dir, parties, days=args.days, overwrite=args.force)
        for key, path in paths.items():
            print(f"{key}: {path}")
        return 0
    from .runtime.party_data import run as party_data_run

    party_data_run(args)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from . import __version__

        print(__version__)
        return 0
    if args.command == "link-relay":
        from .federation.link_relay import run as link_relay_run

        return link_relay_run(args)
    if args.command in ("party", "certs", "party-data"):
        return _run_network_command(args)
    if args.command != "bench":
        parser.print_help()
        return 2
    from .bench.command import run_command

    options = {k: v for k, v in vars(args).items() if k not in ("command", "benchmark", "_module", "version")}
    return run_command(args._module, args.benchmark, options)


if __name__ == "__main__":
    sys.exit(main())
