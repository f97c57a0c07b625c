"""A data party that deviates from HE+DP: the scaled request (issue 39), measured.

The key holder of "paillier_dp" decrypts ``x_P + R_P`` (the party's gradient in fixed point plus its
mask), adds the noise of the job's mechanism and answers. A passive party that raises its masked
product to a plaintext power ``M`` before adding its mask -- honest width, honest header -- gets
``M x_P + noise`` back and divides by ``M``: its gradient with noise ``sigma / M``. The masked value
``M x_P + R_P`` is uniformly spread like an honest one, so the key holder cannot tell it from one
(its range check bounds the honest range of a masked value, which a scaled one still lies in). The
guarantee is stated for data parties that follow the protocol (:mod:`vflsec.glm.he_dp`,
docs/threat-model.md); this test measures what the deviation gains and that nothing detects it."""
from __future__ import annotations

import warnings

import gmpy2
import numpy as np
import pytest

from vflsec.glm import GLMJob, PartyData, run_job

pytest.importorskip("phe")

WIDTHS = {"active": 3, "passive": 5}


def _job(**fields):
    base = dict(protocol="paillier_dp", n_samples=60, batch_size=30, epochs=1, lr=1.0, lam=0.0, k=2.0,
                passives=("passive",), coordinator="coordinator", key_bits=2048, epsilon=1.0, delta=1e-5,
                noise_seed=4, widths=WIDTHS)
    base.update(fields)
    return GLMJob(**base)


def _data():
    rng = np.random.default_rng(5)
    blocks = [rng.normal(size=(60, d)) for d in WIDTHS.values()]
    blocks = [X / np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None] for X in blocks]
    y = np.where(blocks[0][:, 0] + blocks[1][:, 1] > 0, 1.0, -1.0)
    return {"active": PartyData(blocks[0], y), "passive": PartyData(blocks[1])}


def _passive_first_gradient(job, monkeypatch, power=1):
    """The passive party's unmasked first-step gradient (what it keeps), its request raised to ``power``."""
    from vflsec.glm.paillier import PaillierScheme
    from vflsec.glm.paillier_dp import PaillierDPScheme
    from vflsec.he.paillier import PaillierEncryptedVector

    kept = []

    def masked_dot(self, enc, X, factor):
        product = enc.dot(X)
        if X.shape[1] == WIDTHS["passive"] and power != 1:  # the deviating party: Enc(x)^M = Enc(M x)
            nsq = gmpy2.mpz(self.public_key.nsquare)
            product = PaillierEncryptedVector(self.public_key, [int(gmpy2.powmod(c, power, nsq))
                                                                for c in product.ciphertexts], product.level)
        mask = [int(v) for v in np.random.default_rng().integers(0, 2 ** 62, size=len(product))]
        mask = [m << (self._mask_bits - 62) for m in mask]  # uniform-looking on [0, 2^mask_bits)
        return product.add_encoded(mask).to_bytes(), (mask, product.level, factor, X.shape[1])

    def unmask(self, reply, state, size):
        mask, level, factor, width = state
        value = PaillierScheme.unmask(self, reply, (mask, level, factor), size)
        if width == WIDTHS["passive"]:
            value = value / power
            kept.append(value)
        return value

    monkeypatch.setattr(PaillierDPScheme, "masked_dot", masked_dot)
    monkeypatch.setattr(PaillierDPScheme, "unmask", unmask, raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # 2048-bit keys keep the test short
        result = run_job(job, _data(), timeout=600)
    return kept[0], result


def test_a_passive_party_that_scales_its_request_removes_the_key_holders_noise_undetected(monkeypatch):
    exact, _ = _passive_first_gradient(_job(noise=False), monkeypatch)
    honest, _ = _passive_first_gradient(_job(), monkeypatch)
    scaled, result = _passive_first_gradient(_job(), monkeypatch, power=2 ** 60)
    sigma = result.results["coordinator"].info["dp_sigma"]
    honest_error = float(np.sqrt(np.mean((honest - exact) ** 2)))
    scaled_error = float(np.abs(scaled - exact).max())
    # what the protocol promises: the kept gradient carries the key holder's noise
    assert honest_error > 1e-3 and honest_error > 1e6 * scaled_error
    # what the deviation gains: the noise divided by 2^60, down to the fixed point's rounding
    assert scaled_error < 1e-9 < sigma
    # and nothing detects it: the job completed, every party with a model
    assert set(result.results) == {"active", "passive", "coordinator"}
    assert all(np.all(np.isfinite(result.results[p].coef)) for p in ("active", "passive"))
