"""Shared by the runtime tests: a ``vflsec party`` job with a party killed mid-run, and party files run as
processes."""
import os
import subprocess
import sys
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


@pytest.fixture
def run_configs(child_env):
    """``run_configs({name: party file}, timeout=120) -> {name: (exit status, stderr)}``: one quiet ``vflsec
    party`` process per party file, waited for and always killed (for jobs ``write_local_job`` did not write,
    e.g. predict jobs over its parties' outputs)."""
    def run(configs, timeout=120):
        procs = {name: subprocess.Popen([sys.executable, "-m", "vflsec", "party", "--quiet", "--config", str(path)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        env={**os.environ, **child_env})
                 for name, path in configs.items()}
        try:
            return {name: (proc.wait(timeout), proc.communicate()[1]) for name, proc in procs.items()}
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
    return run
