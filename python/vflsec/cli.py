"""The ``vflsec`` command line: ``vflsec bench <name> [options]``, ``vflsec
party --config party.toml [--job KEY=VALUE]``, ``vflsec init OUT_DIR`` (a job folder
per protocol), ``vflsec audit``, ``vflsec certs init``, ``vflsec party-data`` and
``vflsec link-relay``.

Errors follow one convention in every command: an argument error or an
ordinary mistake (unknown dataset, wrong attribute counts, existing
certificates without ``--force``, a missing data file, a missing optional
extra) is one line on stderr, ``vflsec <cmd>: error: <what> -- <the fix>``,
and exit status 2, without a traceback; ``vflsec --debug <cmd> ...`` shows
the traceback instead. Ctrl-C is one line, ``vflsec <cmd>: interrupted``,
and exit status 130.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, List, NoReturn, Optional, Tuple

from .errors import CommandError, missing_dataset, missing_module, require_extra

# vflsec.bench is imported only by `vflsec bench ...`, and of its benchmarks only the one named
# (vflsec.bench.registry lists them without importing them): every other command starts fast.


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: X)`` where the help text does not already state a
    default and there is one worth showing (not None, not a store_true False)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text or action.required or action.default is None or action.default is False
                or action.default == argparse.SUPPRESS):
            return text
        return super()._get_help_string(action) or text


class CommandParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line, ``<prog>: error:
    <message> (see --help)``, exit status 2; no option prefixes are
    accepted (``--seed`` is never taken for ``--seeds``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {' '.join(message.split())} (see --help)\n")
        raise SystemExit(2)


def _words(argv: List[str]) -> Tuple[Optional[str], Optional[str]]:
    """The command and the word after it (``bench glm`` -> ("bench", "glm")), options skipped."""
    words = [a for a in argv if not a.startswith("-")]
    return (words[0] if words else None), (words[1] if len(words) > 1 else None)


def _build_parser(argv: List[str]) -> CommandParser:
    parser = CommandParser(prog="vflsec", description="Secure compute for vertical federated learning.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an error instead of the one-line message")
    sub = parser.add_subparsers(dest="command", parser_class=CommandParser)
    bench = sub.add_parser("bench", help="run a benchmark and write its results")
    command, benchmark = _words(argv)
    if command == "bench":
        _add_bench_commands(bench, benchmark, argv)
    _add_network_commands(sub)
    return parser


def _add_bench_commands(bench: Any, selected: Optional[str], argv: List[str]) -> None:
    """Every registered benchmark as a subcommand; only ``selected`` is imported (for its flags)."""
    from .bench.registry import EXPERIMENTS, load_experiment
    from .bench.runner import add_arguments

    bench_sub = bench.add_subparsers(dest="benchmark", required=True, parser_class=CommandParser)
    for name, entry in EXPERIMENTS.items():
        p = bench_sub.add_parser(name, help=entry.summary, description=entry.summary)
        if name != selected:
            continue
        if not {"-h", "--help", "--print-config"} & set(argv):
            # before the benchmark is imported or any work starts (every report draws its plots)
            require_extra("matplotlib", *entry.requires)
        experiment = load_experiment(name)
        add_arguments(p, experiment)
        p.set_defaults(_experiment=experiment)


def _add_network_commands(sub: Any) -> None:
    party = sub.add_parser("party", help="run one party of a federated job (gRPC, mutual TLS)")
    party.add_argument("--config", required=True, help="the party's TOML configuration")
    party.add_argument("--resume", action="store_true", help="continue from the last common checkpoint")
    party.add_argument("--insecure", action="store_true",
                       help="plaintext transport without authentication (development only; warns)")
    party.add_argument("--quiet", action="store_true", help="log warnings and errors only")
    party.add_argument("--job", action="append", default=None, metavar="KEY=VALUE",
                       help="replace a [job] key of the job file (repeatable; VALUE is TOML, a bare word a string: "
                            "--job epochs=5 --job protocol=hdp); every party must pass the same")
    job_dir = sub.add_parser("init", help="write a ready-to-run job folder: job and party files (the key holder's "
                                          "too), certificates, run scripts, one job per protocol")
    from .runtime.init_job import add_arguments as add_init_arguments

    add_init_arguments(job_dir)
    certs = sub.add_parser("certs", help="certificates for mutual TLS")
    certs_sub = certs.add_subparsers(dest="certs_command", required=True, parser_class=CommandParser)
    init = certs_sub.add_parser("init", help="create a development CA and party certificates")
    init.add_argument("--dir", default="certs", help="output folder (default: certs)")
    init.add_argument("--parties", required=True, help="comma-separated party names")
    init.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    init.add_argument("--force", action="store_true", help="replace existing CA and certificates")
    relay = sub.add_parser("link-relay", help="relay TCP connections over an emulated link (bandwidth, RTT)")
    from .federation.link_relay import add_arguments as add_link_relay_arguments

    add_link_relay_arguments(relay)
    audit = sub.add_parser("audit", help="audit every DP mechanism: empirical epsilon lower bounds against "
                                         "the claimed epsilons")
    from .audit.runner import add_arguments as add_audit_arguments

    add_audit_arguments(audit)
    data = sub.add_parser("party-data", help="write per-party CSVs (ID column, shuffled, partly "
                                             "overlapping rows) from a dataset")
    from .runtime.party_data import add_arguments as add_party_data_arguments

    add_party_data_arguments(data)


def _run_network_command(args: argparse.Namespace) -> int:
    if args.command == "party":
        from .runtime.party import main as party_main

        require_extra("grpc", "google.protobuf")
        if not args.insecure:
            require_extra("cryptography")
        return party_main(args.config, resume=args.resume, insecure=args.insecure, quiet=args.quiet,
                          job=args.job)
    if args.command == "certs":
        from .federation.tls import init_certificates

        require_extra("cryptography")
        parties = [p.strip() for p in args.parties.split(",") if p.strip()]
        try:
            paths = init_certificates(args.dir, parties, days=args.days, overwrite=args.force)
        except FileExistsError as exc:
            raise CommandError(str(exc).split(" (")[0],
                               "pass --force to replace them, or choose another --dir") from exc
        for key, path in paths.items():
            print(f"{key}: {path}")
        return 0
    from .runtime.party_data import run as party_data_run

    party_data_run(args)
    return 0


def _command_name(args: Optional[argparse.Namespace], argv: List[str]) -> str:
    if args is None or getattr(args, "command", None) is None:
        # a benchmark's missing extra is refused while its parser is built, before args exist
        command, benchmark = _words(argv)
        return f"vflsec bench {benchmark}" if command == "bench" and benchmark else "vflsec"
    words = ["vflsec", args.command]
    for attr in ("benchmark", "certs_command"):
        if getattr(args, attr, None):
            words.append(getattr(args, attr))
    return " ".join(words)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _dispatch(parser: CommandParser, args: argparse.Namespace) -> int:
    if args.version:
        from . import __version__

        print(__version__)
        return 0
    if args.command == "init":
        from .runtime.init_job import run as init_run

        return init_run(args)
    if args.command == "link-relay":
        from .federation.link_relay import run as link_relay_run

        return link_relay_run(args)
    if args.command in ("party", "certs", "party-data"):
        return _run_network_command(args)
    if args.command == "audit":
        from .audit.runner import main as audit_main

        require_extra("torch", "dp_accounting")
        return audit_main(args)
    if args.command != "bench":
        parser.print_help()
        return 2
    from .bench.errors import BenchConfigError
    from .bench.runner import run

    options = {k: v for k, v in vars(args).items()
               if k not in ("command", "benchmark", "_experiment", "version", "debug")}
    try:
        run(args._experiment, options)
    except BenchConfigError as exc:
        fix = "" if " -- " in str(exc) else (f"edit the configuration or flag (vflsec bench {args.benchmark} "
                                             "--print-config shows the shipped one)")
        raise CommandError(" ".join(str(exc).split()), fix) from None
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug is taken anywhere before a "--" (vflsec --debug bench glm ... or vflsec bench glm ... --debug)
    end = argv.index("--") if "--" in argv else len(argv)
    debug = "--debug" in argv[:end]
    argv = [a for a in argv[:end] if a != "--debug"] + argv[end:]
    args: Optional[argparse.Namespace] = None
    if argv == ["--version"]:  # without building the parser: nothing else is imported
        from . import __version__

        print(__version__)
        return 0
    try:
        parser = _build_parser(argv)
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # said by the command's own parser, not the top-level one
            sys.stderr.write(f"{_command_name(args, argv)}: error: unrecognized arguments: {' '.join(unknown)} "
                             f"(see --help)\n")
            raise SystemExit(2)
        status = _dispatch(parser, args)
        if status:  # every failure leaves main() the same way: SystemExit with its status
            raise SystemExit(status)
        return 0
    except SystemExit:
        raise
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{_command_name(args, argv)}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as exc:  # noqa: BLE001 - one line unless --debug
        if debug:
            raise
        prog = _command_name(args, argv)
        # only a benchmark raises it, and then vflsec.bench.errors is loaded
        partial_run_error = getattr(sys.modules.get("vflsec.bench.errors"), "PartialRunError", None)
        if partial_run_error is not None and isinstance(exc, partial_run_error):
            done = f"; the finished cells are in {exc.out} (marked partial)"
            exc = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        else:
            done = ""
        if isinstance(exc, CommandError):
            what, fix, status = exc.what, exc.fix, 2
        elif isinstance(exc, ImportError):
            err = missing_module(exc)
            what, fix, status = err.what, err.fix, 2
        elif isinstance(exc, FileExistsError):
            what, fix, status = _one_line(exc), "remove it or choose another output", 2
        elif isinstance(exc, FileNotFoundError) and " dataset: file " in str(exc):
            err = missing_dataset(exc)
            what, fix, status = err.what, err.fix, 2
        elif isinstance(exc, FileNotFoundError):
            what, fix, status = _one_line(exc), "check the path", 2
        elif isinstance(exc, (ValueError, KeyError, OSError)):
            what, fix, status = _one_line(exc), "check the arguments (see --help)", 2
        else:
            what, fix, status = f"{type(exc).__name__}: {_one_line(exc)}", "run with --debug for the traceback", 1
        if done:  # a failure mid-run, after the finished cells were written
            what, fix, status = what + done, "run with --debug for the traceback", 1
        print(f"{prog}: error: {what}" + (f" -- {fix}" if fix and " -- " not in what else ""), file=sys.stderr)
        raise SystemExit(status) from None


if __name__ == "__main__":
    sys.exit(main())
