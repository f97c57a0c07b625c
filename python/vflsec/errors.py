"""One-line errors of the ``vflsec`` commands.

Convention: an ordinary mistake is reported as one line on stderr,
``vflsec <cmd>: error: <what> -- <the fix>``, with exit status 2 and no
traceback (``vflsec --debug <cmd> ...`` shows it). Commands raise
:class:`CommandError` (or a plain ``ValueError``/``FileNotFoundError``/
``ImportError``, which :func:`vflsec.cli.main` words the same way).
"""
from __future__ import annotations

import importlib
from typing import Optional

__all__ = ["EXTRAS", "CommandError", "missing_dataset", "missing_module", "require_extra"]

# top-level module of an optional dependency -> the extra that installs it
EXTRAS = {
    "tenseal": "he", "phe": "he", "gmpy2": "he",
    "torch": "torch",
    "spu": "mpc", "jax": "mpc",
    "grpc": "net", "google": "net", "cryptography": "net", "private_set_intersection": "net",
    "matplotlib": "bench", "tqdm": "bench",
    "skfuzzy": "baselines", "faiss": "baselines", "opendp": "baselines",
    "pyarrow": "data", "pandas": "data",
}

BUILT_IN = "breast and synthetic are built in"


class CommandError(Exception):
    """An ordinary mistake: ``what`` went wrong and ``fix`` says what to do.

    ``shared``: for a mistake found between the parties of a job (``vflsec party``), what this
    party's peers are told when it stops (None: the whole message); set where the message shows
    something of this party's own (example IDs, its values of a job file's keys)."""

    def __init__(self, what: str, fix: str = "", *, shared: Optional[str] = None) -> None:
        super().__init__(f"{what} -- {fix}" if fix else what)
        self.what = what
        self.fix = fix
        self.shared = shared


def _one_line(text: str) -> str:
    return " ".join(text.split())


def missing_module(exc: ImportError, module: Optional[str] = None) -> CommandError:
    """The error for an optional dependency that does not import, with the ``pip install`` hint."""
    name = (module or getattr(exc, "name", None) or "").split(".")[0]
    extra = EXTRAS.get(name)
    if extra is None:
        return CommandError(f"cannot import {name or 'a module'}: {_one_line(str(exc))}",
                            "reinstall vflsec (pip install .)")
    return CommandError(f"the optional dependency {name!r} is not installed",
                        f'install the {extra!r} extra: pip install ".[{extra}]" (or ".[all]")')


def require_extra(*modules: str) -> None:
    """Raise :class:`CommandError` with the install hint unless every module imports."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise missing_module(exc, module) from exc


def missing_dataset(exc: FileNotFoundError) -> CommandError:
    """A data set file that is not there (:func:`vflsec.data.load_dataset`'s error) in one line."""
    first = str(exc).split("\n")[0].strip()
    if "; looked in:" in first:
        head, _, where = first.partition("; looked in:")
        first = head + (f" (looked in:{where})" if where.strip() else " (looked in the folders of --data-dir / "
                                                                           "$VFLSEC_DATA)")
    return CommandError(first, f"download it and pass --data-dir DIR or set VFLSEC_DATA ({BUILT_IN})")
