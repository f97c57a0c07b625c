"""Shared by the runtime tests: a ``vflsec party`` job with a party killed mid-run."""
import time

import pytest


@pytest.fixture
def killed_job(tmp_path, fast_network, child_env):
    """``killed_job(job_table, frames, checkpoint_wait=60.0) -> (local job, status, seconds)``: the
    job's ``vflsec party`` processes (written under ``tmp_path``), with passive2 killed once it has
    checkpointed 3 epochs (mid-run, most likely mid-epoch); the other parties' ``(exit status,
    stderr)`` and the seconds they took to stop after the kill."""
    from vflsec.runtime.launch import kill_parties, start_parties, wait_parties, write_local_job

    def run(job_table, frames, checkpoint_wait=60.0):
        local = write_local_job(tmp_path, job_table, frames, network=fast_network)
        procs = start_parties(local, env=child_env)
        try:
            ckpt = tmp_path / "checkpoints" / "passive2"
            deadline = time.monotonic() + checkpoint_wait
            while not (ckpt.is_dir() and len(list(ckpt.glob("*.npz"))) >= 3):
                assert time.monotonic() < deadline, "passive2 never checkpointed"
                assert procs["passive2"].process.poll() is None, procs["passive2"].stderr_path.read_text()
                time.sleep(0.005)
            procs["passive2"].process.kill()
            killed_at = time.monotonic()
            status = wait_parties({n: procs[n] for n in ("active", "passive1")}, fast_network["peer_timeout"] + 10)
            return local, status, time.monotonic() - killed_at
        finally:
            kill_parties(procs)

    return run
