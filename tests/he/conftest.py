"""What the HE tests share."""
from __future__ import annotations

import warnings

import numpy as np
import pytest


@pytest.fixture(scope="module")
def keypair():
    """A 2048-bit Paillier key pair per test module (its strength warning silenced: the size is for speed)."""
    pytest.importorskip("phe")
    pytest.importorskip("gmpy2")
    from vflsec.he import paillier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paillier.WeakKeyWarning)
        return paillier.generate_keypair(2048)


@pytest.fixture
def party_files(tmp_path):
    """A valid loopback job (plain, two parties, no TLS) and ``with_compute(table)``: the
    active party's file with ``[compute]`` set to ``table``."""
    from vflsec.runtime.launch import to_toml, write_local_job

    ids = [f"id{i}" for i in range(16)]
    rng = np.random.default_rng(2)
    local = write_local_job(tmp_path, {"protocol": "plain", "epochs": 1, "batch_size": 8, "active": "active",
                                       "passives": ["passive"]},
                            {"active": (ids, rng.uniform(-0.5, 0.5, (16, 2)), np.arange(16) % 2),
                             "passive": (ids, rng.uniform(-0.5, 0.5, (16, 2)), None)}, insecure=True)
    config = local.configs["active"]
    original = config.read_text()

    def with_compute(table):
        config.write_text(original + "\n" + to_toml({"compute": table}))
        return config

    return with_compute
