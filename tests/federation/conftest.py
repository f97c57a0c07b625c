"""Fixtures the federation tests share (tests/conftest.py holds those of several folders)."""
import threading

import pytest


@pytest.fixture(scope="session")
def run_psi():
    """``run_psi(sets, leader="a", **kwargs) -> (results, errors, hub)``: ``align_ids`` run by every
    party of ``sets`` (name -> its IDs) in its own thread over one in-memory hub that keeps payloads;
    ``kwargs`` go to every party's ``align_ids``; ``errors`` maps a party to what it raised."""
    from vflsec.federation.channel import InMemoryHub
    from vflsec.federation.psi import align_ids

    def run(sets, leader="a", **kwargs):
        hub = InMemoryHub(default_timeout=60, keep_payloads=True)
        endpoints = {name: hub.endpoint(name) for name in sets}
        members = [n for n in sets if n != leader]
        results, errors = {}, {}

        def party(name):
            try:
                results[name] = align_ids(endpoints[name], sets[name], leader=leader,
                                          members=members if name == leader else (), **kwargs)
            except Exception as exc:  # noqa: BLE001 - reported by the test
                errors[name] = exc

        threads = [threading.Thread(target=party, args=(n,)) for n in sets]
        [t.start() for t in threads]
        [t.join(120) for t in threads]
        return results, errors, hub

    return run
