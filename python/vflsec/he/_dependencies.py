"""The optional packages behind each scheme, and the error when one is missing.

Each scheme imports its own back-end and nothing else: Paillier needs phe
and gmpy2 (the ``paillier`` extra), CKKS needs TenSEAL (the ``he`` extra,
which also holds Paillier's). The error is a :class:`ModuleNotFoundError`
that keeps the missing module's ``name``, so callers that map modules to
extras (:func:`vflsec.errors.missing_module`) still recognise it.
"""
from __future__ import annotations

PAILLIER_INSTALL = 'pip install "vflsec[paillier]" (phe and gmpy2; "vflsec[he]" adds TenSEAL for CKKS)'
CKKS_INSTALL = 'pip install "vflsec[he]"'


def missing_dependency(feature: str, exc: ImportError, install: str) -> ModuleNotFoundError:
    """The error for ``feature`` when importing its back-end raised ``exc``."""
    module = (exc.name or "").split(".")[0]
    what = repr(module) if module else "an optional dependency"
    return ModuleNotFoundError(f"{feature} needs {what}, which does not import here ({exc}): {install}",
                               name=module or None)
