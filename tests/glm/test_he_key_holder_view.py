"""What the HE key holder learns (issue 39's threat model): every gradient it decrypts is masked by
the requesting party with a uniform integer mod n, so its view is uniform whatever the data.
Measured on a Paillier job: the key holder reads each value it decrypts as if it were the
gradient (the upper half of Z_n is negative) and guesses each coordinate's sign; paired with the
gradient the requesting party then unmasks, its guesses are right half the time (chance). A copy
of the protocol with the masks set to zero, where the key holder would read the gradients, gets
every sign right: the test can fail."""
from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pytest

pytest.importorskip("phe")

from vflsec.federation.channel import InMemoryHub  # noqa: E402
from vflsec.glm import GLMJob, PartyData  # noqa: E402
from vflsec.glm.paillier import PaillierKeyHolder, PaillierScheme  # noqa: E402
from vflsec.glm.registry import get_protocol  # noqa: E402
from vflsec.he import WeakKeyWarning  # noqa: E402
from vflsec.he.paillier import PaillierEncryptedVector, PaillierPublicKey  # noqa: E402
from vflsec.vfl.runner import run_programs  # noqa: E402

N, BATCH, EPOCHS, WIDTHS = 48, 12, 4, {"active": 3, "passive": 3}


def _signs_read(monkeypatch, masked: bool) -> float:
    """The share of gradient signs the key holder reads right over a whole job."""
    guessed, truth, requests = {}, {}, {}
    masked_dot, unmask, answer = PaillierScheme.masked_dot, PaillierScheme.unmask, PaillierKeyHolder.answer_gradient

    def spy_masked_dot(self, enc, X, factor):
        payload, state = masked_dot(self, enc, X, factor)
        requests[id(state)] = hashlib.sha256(payload).hexdigest()
        return payload, state

    def spy_unmask(self, reply, state, size):
        gradient = unmask(self, reply, state, size)
        truth[requests[id(state)]] = np.sign(gradient)
        return gradient

    def spy_answer(self, data, size):
        vector = PaillierEncryptedVector.from_bytes(self.public_key, data)
        n = self.public_key.n  # a value in the upper half of Z_n decodes as negative
        guessed[hashlib.sha256(data).hexdigest()] = np.array(
            [-1.0 if v > n // 2 else float(v > 0) for v in self.private_key.decrypt_raw(vector)])
        return answer(self, data, size)

    monkeypatch.setattr(PaillierScheme, "masked_dot", spy_masked_dot)
    monkeypatch.setattr(PaillierScheme, "unmask", spy_unmask)
    monkeypatch.setattr(PaillierKeyHolder, "answer_gradient", spy_answer)
    if not masked:
        monkeypatch.setattr(PaillierPublicKey, "random_mask", lambda self, size: [0] * size)
    rng = np.random.default_rng(0)
    blocks = {p: rng.normal(size=(N, w)) / 2.0 for p, w in WIDTHS.items()}
    y = np.where(blocks["active"][:, 0] + blocks["passive"][:, 0] > 0, 1.0, -1.0)
    data = {"active": PartyData(blocks["active"], y), "passive": PartyData(blocks["passive"])}
    job = GLMJob(protocol="paillier", n_samples=N, batch_size=BATCH, epochs=EPOCHS, lr=0.5, passives=("passive",),
                 coordinator="coordinator", key_bits=2048, options={"encrypted_loss": False}, widths=dict(WIDTHS))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakKeyWarning)
        run_programs(job, get_protocol("paillier").roles, data, InMemoryHub(), timeout=300)
    monkeypatch.undo()
    assert truth and set(truth) == set(guessed)  # every request answered and unmasked, paired by its bytes
    right = np.concatenate([guessed[key] == truth[key] for key in truth])
    return float(right.mean())


def test_the_key_holder_reads_no_gradient_sign_from_what_it_decrypts(monkeypatch):
    read = _signs_read(monkeypatch, masked=True)
    # 96 signs (16 steps x 2 parties x 3 columns), each a fair coin under a uniform mask: std 0.05
    assert 0.3 < read < 0.7, read


def test_without_the_masks_the_same_reading_gets_every_sign(monkeypatch):
    assert _signs_read(monkeypatch, masked=False) == 1.0
