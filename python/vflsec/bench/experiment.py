"""What one benchmark is: an :class:`Experiment`, run by :mod:`.runner`.

Each benchmark is a folder ``vflsec/bench/experiments/<name>/`` of the same
three modules and a TOML file:

- ``grid.py``: the :class:`Experiment` subclass (its flags, how its grid is read
  from ``<name>.toml`` and checked before any work starts) and the grid's
  dataclass;
- ``cells.py``: the measurements (:meth:`Experiment.run_cells`), which add
  each finished cell to the results as they go;
- ``report.py``: ``report.md`` and the PNG plots from the results alone
  (:meth:`Experiment.render`), so ``--rerender`` rewrites them without measuring;
- ``<name>.toml``: the grid as data, one table per variant (``[full]``, ``[quick]``).

Published numbers and the claims judged against them live in
``vflsec/bench/papers/<paper>.toml`` (:mod:`.claims`). The runner owns
everything else: the common flags, the configuration file and its
command-line overrides, the results envelope (:mod:`.envelope`), Ctrl-C and
partial results, and ``--rerender``.
"""
from __future__ import annotations

import abc
import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, List, Optional, Tuple

__all__ = ["Experiment", "Override", "comma_list"]


def comma_list(kind: Callable[[str], Any] = str) -> Callable[[str], Tuple[Any, ...]]:
    """An argparse ``type`` for ``--flag a,b,c``: a non-empty tuple of ``kind(item)``."""

    def parse(text: str) -> Tuple[Any, ...]:
        items = tuple(kind(part.strip()) for part in text.split(",") if part.strip())
        if not items:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
        return items

    parse.__name__ = f"comma-separated {getattr(kind, '__name__', 'value')} list"
    return parse


@dataclass(frozen=True)
class Override:
    """A command-line flag that overrides one key of the grid (the runner applies
    and validates it against the grid's schema, as if the TOML file said so)."""

    flag: str                    # "--datasets"
    key: str                     # the grid field it sets
    type: Callable[[str], Any]   # argparse type (e.g. int, comma_list(str))
    help: str
    metavar: Optional[str] = None


class Experiment(abc.ABC):
    """One benchmark. Subclasses set the class attributes and implement
    :meth:`load_grid`, :meth:`run_cells` and :meth:`render`."""

    name: ClassVar[str]
    """``vflsec bench <name>``; also the folder, the shipped ``<name>.toml`` and the default ``--out``."""
    results_file: ClassVar[str] = "results.json"
    versions: ClassVar[Tuple[str, ...]] = ("numpy",)
    """Packages whose versions the envelope records (vflsec always)."""
    quick_help: ClassVar[str] = "the [quick] variant of the grid"
    seed_key: ClassVar[Optional[str]] = "seed"
    """The grid key ``--seed`` overrides (None: the experiment reads ``options["seed"]`` itself)."""
    seed_help: ClassVar[Optional[str]] = None
    """``--seed``'s help where the seed covers less than the default text says (None: the default)."""
    overrides: ClassVar[Tuple[Override, ...]] = ()

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The experiment's own flags that are not grid keys (``--data-dir``, ``--device``, ...)."""
        return None

    @abc.abstractmethod
    def load_grid(self, *, quick: bool, path: Optional[Path], options: Dict[str, Any]) -> Any:
        """The grid of ``path`` (a user's TOML; None: the shipped ``<name>.toml``), variant
        ``[quick]`` or ``[full]``, as a validated dataclass (:func:`.config.load_variant`)."""

    def check(self, grid: Any, options: Dict[str, Any]) -> None:
        """Refuse, before any work, what would fail later (a missing dataset or extra)."""
        return None

    def annotate(self, result: Dict[str, Any], options: Dict[str, Any]) -> None:
        """Add inputs that are not measurements (a cited earlier run) to ``result``;
        called for a run before its cells and for ``--rerender``."""
        return None

    def record_grid(self, grid: Any) -> Dict[str, Any]:
        """The grid as written into the results' ``"config"``."""
        as_dict = getattr(grid, "as_dict", None)
        if callable(as_dict):
            return dict(as_dict())
        import dataclasses

        return dataclasses.asdict(grid)

    def seed_of(self, grid: Any) -> Optional[int]:
        """The run's seed, for the envelope."""
        return getattr(grid, self.seed_key, None) if self.seed_key else None

    @abc.abstractmethod
    def run_cells(self, grid: Any, options: Dict[str, Any], result: Dict[str, Any]) -> None:
        """Measure every cell of ``grid``, adding each to ``result`` as it finishes: whatever
        is in ``result`` when the run is interrupted is written, marked partial."""

    @abc.abstractmethod
    def render(self, result: Dict[str, Any], out: Path) -> List[str]:
        """Write ``report.md`` and the plots of ``result`` into ``out`` (never measuring);
        return the names of the files written."""

    def results_name(self, options: Dict[str, Any]) -> str:
        """The results file's name for these options (default :attr:`results_file`)."""
        return self.results_file

    def default_out(self) -> Path:
        return Path("bench-out") / self.name
