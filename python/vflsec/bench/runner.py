"""The one runner of every ``vflsec bench <name>`` (model: Opacus
``benchmarks/run_benchmarks.py``): the experiment (:mod:`.experiment`) says what
to measure; the runner owns the rest, the same for every benchmark:

- the common flags: ``--quick``, ``--config FILE``, ``--print-config``, ``--out DIR``,
  ``--seed N``, ``--rerender DIR``, and the experiment's grid overrides;
- the configuration: the shipped ``<name>.toml`` or ``--config``, variant
  ``[quick]``/``[full]``, flags applied on top and validated the same way;
- the results envelope (:mod:`.envelope`): machine, versions, git, seed, load;
- interrupts and failures: Ctrl-C writes the finished cells (``"partial":
  true``), renders them and exits 130 with one line; an error does the same
  and ends as :class:`~.errors.PartialRunError` (exit 1, the cause named);
- ``--rerender DIR``: nothing is measured, the report and plots of
  ``DIR/<results file>`` are written again.

What a run contains is decided by its configuration alone, never by how
fast the machine is: no cell is skipped because it would take long.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from .errors import BenchConfigError, PartialRunError
from .experiment import Experiment

__all__ = ["add_arguments", "read_results", "run", "write_results"]

_COMMON = ("quick", "config", "print_config", "out", "seed", "rerender")


def add_arguments(parser: argparse.ArgumentParser, experiment: Experiment) -> None:
    """The common flags, the experiment's grid overrides, then its own flags."""
    name = experiment.name
    parser.add_argument("--quick", action="store_true", help=experiment.quick_help)
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help=f"run the grid of this TOML file instead of the shipped {name}.toml (start from "
                             f"--print-config); flags given on the command line override it")
    parser.add_argument("--print-config", action="store_true",
                        help=f"print the shipped {name}.toml (every variant: [full], [quick], ...) and exit")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help=f"output folder (default: {experiment.default_out()})")
    parser.add_argument("--seed", type=int, default=None,
                        help=experiment.seed_help or f"base seed of the run, so runs reproduce (what it seeds: "
                                                     f"the comments of {name}.toml; default: the configuration's)")
    parser.add_argument("--rerender", type=Path, default=None, metavar="DIR",
                        help=f"run nothing: write DIR's report and plots again from DIR/{experiment.results_file} "
                             "(its numbers are not touched)")
    for override in experiment.overrides:
        parser.add_argument(override.flag, dest=override.key, type=override.type, default=None,
                            metavar=override.metavar, help=override.help + " (overrides the configuration)")
    experiment.add_arguments(parser)


def write_results(path: Path, result: Dict[str, Any]) -> None:
    """Strict JSON (RFC 8259): NaN and +-inf, which strict parsers reject, are written as null."""
    from .common import write_json

    write_json(path, result)


def read_results(directory: Path, name: str = "results.json") -> Dict[str, Any]:
    """The saved results ``directory/name`` of an earlier run; a one-line
    :class:`BenchConfigError` when it cannot be read."""
    path = Path(directory) / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BenchConfigError(f"--rerender {directory}: cannot read {path} ({exc}) -- give the folder of an "
                               f"earlier run") from None


def _print_written(out: Path, files: List[str]) -> None:
    print(f"wrote {out}/: {', '.join(files)}")


def load_grid(experiment: Experiment, options: Dict[str, Any]) -> Any:
    """The configuration of a run: the variant of the shipped (or ``--config``) TOML,
    then the command-line overrides (``--seed`` and the experiment's), validated."""
    from .config import with_overrides

    grid = experiment.load_grid(quick=bool(options.get("quick")), path=options.get("config"), options=options)
    given = {o.key: options[o.key] for o in experiment.overrides if options.get(o.key) is not None}
    if options.get("seed") is not None and experiment.seed_key:
        given[experiment.seed_key] = options["seed"]
    if given:
        flags = [o.flag for o in experiment.overrides if o.key in given]
        if "seed" in options and options.get("seed") is not None and experiment.seed_key:
            flags.append("--seed")
        grid = with_overrides(grid, f"command line ({', '.join(flags)})", **given)
    return grid


def run(experiment: Experiment, options: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Run ``vflsec bench <experiment.name>`` with the parsed ``options`` (argparse's
    namespace as a dict); returns the results (None for ``--print-config``)."""
    from .config import shipped_config_text

    options = dict(options)
    if options.get("print_config"):
        sys.stdout.write(shipped_config_text(experiment.name))
        return None
    if options.get("rerender") is not None:
        folder = Path(options["rerender"])
        result = read_results(folder, experiment.results_name(options))
        experiment.annotate(result, options)
        _print_written(folder, experiment.render(result, folder))
        return result
    grid = load_grid(experiment, options)
    experiment.check(grid, options)
    out = Path(options["out"]) if options.get("out") is not None else experiment.default_out()
    from .envelope import close_envelope, open_envelope

    result = open_envelope(experiment.name, versions=experiment.versions, seed=experiment.seed_of(grid),
                           quick=bool(options.get("quick")))
    result["config"] = experiment.record_grid(grid)
    experiment.annotate(result, options)
    try:
        experiment.run_cells(grid, options, result)
    except (KeyboardInterrupt, Exception) as exc:
        # Whatever finished is written (marked partial) and rendered before stopping.
        close_envelope(result, partial=True)
        _write(experiment, result, out, experiment.results_name(options), partial=True)
        if isinstance(exc, KeyboardInterrupt):
            print(f"vflsec bench {experiment.name}: interrupted; the finished cells are in {out}", file=sys.stderr)
            raise SystemExit(130) from None
        raise PartialRunError(out) from exc
    close_envelope(result)
    _write(experiment, result, out, experiment.results_name(options))
    return result


def _write(experiment: Experiment, result: Dict[str, Any], out: Path, name: str, *, partial: bool = False) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_results(out / name, result)
    try:
        rendered = experiment.render(result, out)
    except Exception as exc:  # noqa: BLE001 - a partial run's report must not hide why the run stopped
        if not partial:
            raise
        print(f"vflsec bench {experiment.name}: the partial results could not be rendered ({exc}); "
              f"{out / name} has them", file=sys.stderr)
        rendered = []
    _print_written(out, [name] + [f for f in rendered if f != name])
