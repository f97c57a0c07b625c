"""The one place vflsec imports torch lazily: torch is an optional extra
(``pip install 'vflsec[torch]'``), so modules that need it import it on use
and a missing install reports which feature asked for it."""
from __future__ import annotations

from typing import Any

__all__ = ["require_torch"]


def require_torch(what: str = "this feature") -> Any:
    """The ``torch`` module; ImportError naming ``what`` needs it when absent."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is an optional extra
        raise ImportError(f"{what} needs torch (pip install 'vflsec[torch]')") from exc
    return torch
