"""Fixtures shared across test folders (a folder's own conftest.py holds what only it uses).

Test modules never import each other (pytest runs with --import-mode=importlib): a helper
two folders need is a fixture here, most of them returning the helper function itself.
"""
import json
import os
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_sessionfinish(session, exitstatus):
    # pytest exits 5 when nothing was collected: a path, -k or -m that selects nothing would
    # otherwise end a lane with "no tests ran" and no failure line. Make it an explicit failure.
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("error: no tests were collected -- check the paths, -k and -m of this run",
                                red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """``../shared/datasets`` beside the checkout (or $VFLSEC_DATA); skips when absent."""
    candidates = [os.environ.get("VFLSEC_DATA"), REPO.parent / "shared" / "datasets"]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
    pytest.skip("real datasets not found: set VFLSEC_DATA or place shared/datasets beside the checkout")


@pytest.fixture(scope="session")
def exception_chain():
    """``exception_chain(exc) -> [exc, exc.__cause__, ...]``: a failed job wraps the party's
    error (and that one its refusal), so tests look for the refusal along the chain."""
    def chain(exc):
        out = []
        while exc is not None:
            out.append(exc)
            exc = exc.__cause__
        return out

    return chain


# -- `vflsec party` processes on loopback --------------------------------------------------

@pytest.fixture(scope="session")
def child_env():
    """What a child Python process (a ``vflsec party``, a flooding peer) adds to its environment:
    it imports vflsec the way this test process does (its folder first on PYTHONPATH), with one
    OpenMP thread."""
    import vflsec

    return {"PYTHONPATH": str(Path(vflsec.__file__).resolve().parents[1]) + os.pathsep
            + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="session")
def fast_network():
    """The ``[network]`` table of loopback jobs: a dead peer is noticed within seconds."""
    return dict(peer_timeout=4.0, heartbeat_interval=0.5, connect_timeout=60.0)


@pytest.fixture(scope="session")
def run_parties(child_env):
    """``run_parties(local, timeout=120.0, names=None, resume=False) -> {name: (exit status, stderr)}``:
    the ``vflsec party`` processes of a job written by ``write_local_job``, waited for and always killed."""
    from vflsec.runtime.launch import kill_parties, start_parties, wait_parties

    def run(local, timeout=120.0, names=None, resume=False):
        procs = start_parties(local, names, resume=resume, env=child_env)
        try:
            return wait_parties(procs, timeout)
        finally:
            kill_parties(procs)

    return run


@pytest.fixture(scope="session")
def party_outputs():
    """``party_outputs(local, status) -> {name: the output JSON}``, once every party exited 0."""
    def outputs(local, status):
        for name, (rc, err) in status.items():
            assert rc == 0, f"party {name} exited with {rc}:\n{err}"
        return {name: json.loads(path.read_text()) for name, path in local.outputs.items()}

    return outputs


@pytest.fixture(scope="session")
def loopback_channels():
    """``loopback_channels(certs, names, settings, per_party=None, expected_tags=None, session="")``:
    a context manager yielding ``{name: GrpcChannel}`` connected on loopback with mutual TLS
    (``certs`` as ``init_certificates`` writes them), heartbeats running; closed on exit.
    ``per_party`` maps a name to its own settings in place of ``settings``."""
    @contextmanager
    def channels(certs, names, settings, *, per_party=None, expected_tags=None, session=""):
        from vflsec.federation.grpc_channel import GrpcChannel
        from vflsec.federation.tls import load_tls
        from vflsec.runtime.launch import free_ports

        ports = dict(zip(names, free_ports(len(names))))
        opened = {
            n: GrpcChannel(n, f"127.0.0.1:{ports[n]}", {p: f"127.0.0.1:{ports[p]}" for p in names if p != n},
                           tls=load_tls(certs / "ca.pem", certs / f"{n}.pem", certs / f"{n}.key"),
                           settings=(per_party or {}).get(n, settings), session=session,
                           expected_tags=(expected_tags or {}).get(n))
            for n in names
        }
        for channel in opened.values():
            channel.start()
        try:
            for channel in opened.values():
                channel.wait_for_peers()
            yield opened
        finally:
            for channel in opened.values():
                channel.close(grace=0.1)

    return channels


# -- HE-VFL: an active party that asks the key holder to decrypt the passive party's [[u_B]] --

@pytest.fixture(scope="session")
def forwarding_attack():
    """The decryption-oracle attack on HE-VFL's key holder (issue 18, item 5), in memory
    (tests/glm/test_he_vfl_oracle.py) and over loopback (tests/federation/test_hostile_peers.py).

    ``n, d_a, d_b, batch, widths``: the job's rows, block widths and batch; ``data()``: the
    blocks ``Xa, Xb`` (rows of norm <= 1) and labels ``y``; ``malicious_active(protocol, mode,
    leaked)``: the active party's program, which forwards [[u_B]] relabelled as its masked
    gradient (mode "whole" or "truncate"), asks for it as the loss ("as_loss") or sends an
    honest-looking request for a later step ("wrong_step"); whatever the key holder answers is
    appended to ``leaked``."""
    from vflsec.glm import he_vfl

    n, d_a, d_b, batch = 40, 3, 2, 20

    def data():
        rng = np.random.default_rng(0)
        Xa = rng.normal(size=(n, d_a))
        Xb = rng.normal(size=(n, d_b))
        Xa /= np.maximum(1.0, np.linalg.norm(Xa, axis=1, keepdims=True))
        Xb /= np.maximum(1.0, np.linalg.norm(Xb, axis=1, keepdims=True))
        y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
        return Xa, Xb, y

    def relabel(protocol, scheme, u_bytes, mode):
        """The passive party's [[u_B]] dressed up as a gradient request."""
        if protocol == "paillier":
            from vflsec.he import paillier as he_paillier

            vector = scheme.loads(u_bytes)
            return he_paillier.EncryptedVector(scheme.public_key, vector.ciphertexts, level=2).to_bytes()
        from vflsec.he import ckks as he_ckks

        vector = scheme.loads(u_bytes)
        length = d_a if mode == "truncate" else len(vector)  # the header claims the gradient's length
        return he_ckks.CKKSEncryptedVector(vector.context, vector.chunks, length).to_bytes()

    def malicious_active(protocol, mode, leaked):
        make_scheme = {"paillier": "PaillierScheme", "ckks": "CKKSScheme"}[protocol]

        def program(endpoint, job, party_data):
            module = __import__(f"vflsec.glm.{protocol}", fromlist=[make_scheme])
            endpoint.send(job.coordinator, he_vfl.TAG_REGISTER, {"n_features": d_a})
            scheme = getattr(module, make_scheme)(endpoint.recv(job.coordinator, he_vfl.TAG_PUBLIC_KEY), job)
            u_bytes = endpoint.recv(job.passives[0], he_vfl.TAG_U_PASSIVE)
            if mode in ("whole", "truncate"):
                request = he_vfl._request(0, he_vfl.PURPOSE_GRADIENT, relabel(protocol, scheme, u_bytes, mode))
            elif mode == "as_loss":
                request = he_vfl._request(0, he_vfl.PURPOSE_LOSS, u_bytes)
            else:  # "wrong_step": an honest-looking gradient for a later step
                enc = scheme.add_plain(scheme.loads(u_bytes), np.zeros(batch))
                payload, _ = scheme.masked_dot(enc, party_data.X[:batch], 1.0)
                request = he_vfl._request(5, he_vfl.PURPOSE_GRADIENT, payload)
            endpoint.send(job.coordinator, he_vfl.TAG_MASKED_GRADIENT, request)
            leaked.append(endpoint.recv(job.coordinator, he_vfl.TAG_GRADIENT))
            raise AssertionError("the key holder answered a forged request")

        return program

    return SimpleNamespace(n=n, d_a=d_a, d_b=d_b, batch=batch, widths={"active": d_a, "passive": d_b},
                           data=data, malicious_active=malicious_active)


# -- a party that tampers with one message (tests/vfl/test_peer_arrays.py, tests/glm/test_he_receipt_bounds.py) --

@pytest.fixture(scope="session")
def hostile_hub():
    """``hostile_hub(sender, receiver, tag, hostile, at=1, accomplices=())``: the real in-memory hub,
    on which party ``sender``'s ``at``-th message to ``receiver`` under ``tag`` is replaced by
    ``hostile(original)`` (``accomplices`` tamper the same way, ahead of it in the receiver's order);
    every other message is the honest program's. ``hub.tampered`` is the sender's channel (its
    ``sent``: the hostile payload, once sent); ``hostile_hub.Tampered(inner, receiver, tag, hostile,
    at)`` wraps any other channel the same way."""
    from vflsec.federation.channel import Channel, InMemoryHub

    class TamperedChannel(Channel):
        def __init__(self, inner, receiver, tag, hostile, at=1):
            super().__init__()
            self.inner, self.receiver, self.tag, self.hostile, self.at = inner, receiver, tag, hostile, at
            self.count = 0
            self.sent = None  # the hostile payload, once sent

        @property
        def name(self):
            return self.inner.name

        def _send(self, receiver, tag, payload):
            if (receiver, tag) == (self.receiver, self.tag):
                if self.count == self.at:
                    payload = self.sent = self.hostile(payload)
                self.count += 1
            self.inner.send(receiver, tag, payload)

        def _recv(self, sender, tag, timeout):
            return self.inner.recv(sender, tag, timeout=timeout)

    class HostileHub(InMemoryHub):
        Tampered = TamperedChannel

        def __init__(self, sender, receiver, tag, hostile, at=1, accomplices=()):
            super().__init__(default_timeout=120.0)
            self.sender = sender
            self._tampered = {name: TamperedChannel(InMemoryHub.endpoint(self, name), receiver, tag, hostile, at)
                              for name in (*accomplices, sender)}
            self.tampered = self._tampered[sender]

        def endpoint(self, name):
            return self._tampered.get(name) or super().endpoint(name)

    return HostileHub
