"""Shared fixtures: the real datasets folder (shared/ beside the checkout)."""
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """``../shared/datasets`` beside the checkout (or $VFLSEC_DATA); skips when absent."""
    candidates = [os.environ.get("VFLSEC_DATA"), REPO.parent / "shared" / "datasets"]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
    pytest.skip("real datasets not found: set VFLSEC_DATA or place shared/datasets beside the checkout")
