"""Issue 18 item 7: key files, checkpoints and weight outputs are written
exclusively (random temp name, O_EXCL|O_NOFOLLOW), 0600, never through a
symlink, and a planted temp file cannot leak or redirect them."""
import os
import stat

import numpy as np
import pytest

from vflsec.federation import tls
from vflsec.federation.checkpoint import EpochCheckpoint
from vflsec.federation.private_files import write_private_bytes


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_write_private_bytes_is_0600_and_atomic(tmp_path) -> None:
    target = tmp_path / "w.bin"
    write_private_bytes(target, b"secret")
    assert target.read_bytes() == b"secret"
    assert _mode(target) == 0o600
    write_private_bytes(target, b"again")
    assert target.read_bytes() == b"again"
    assert _mode(target) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.bin"]


def test_write_private_bytes_tightens_existing_world_readable_file(tmp_path) -> None:
    target = tmp_path / "w.bin"
    target.write_bytes(b"old")
    os.chmod(target, 0o644)
    write_private_bytes(target, b"new")
    assert _mode(target) == 0o600


def test_write_private_bytes_refuses_symlink_at_final_path(tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"untouched")
    link = tmp_path / "w.bin"
    link.symlink_to(elsewhere)
    with pytest.raises(ValueError, match="symlink"):
        write_private_bytes(link, b"secret")
    assert elsewhere.read_bytes() == b"untouched"
    assert link.is_symlink()


def test_tls_key_ignores_planted_tmp_file_and_symlink(tmp_path) -> None:
    # The old code wrote <name>.key.tmp with O_TRUNC, keeping a planted file's
    # 0644 mode (world-readable key) or following a planted symlink.
    stolen = tmp_path / "stolen.pem"
    stolen.write_bytes(b"")
    planted_file = tmp_path / "ca.key.tmp"
    planted_file.write_bytes(b"")
    os.chmod(planted_file, 0o644)
    tls.init_certificates(tmp_path, ["alice"])
    for key in tmp_path.glob("*.key"):
        assert _mode(key) == 0o600, key
    assert planted_file.read_bytes() == b""  # not reused
    sub = tmp_path / "second"
    sub.mkdir()
    (sub / "ca.key.tmp").symlink_to(stolen)
    (sub / "alice.key.tmp").symlink_to(stolen)
    tls.init_certificates(sub, ["alice"])
    assert stolen.read_bytes() == b""
    assert not (sub / "ca.key").is_symlink()
    assert _mode(sub / "ca.key") == 0o600


def test_tls_refuses_symlinked_key_path(tmp_path) -> None:
    stolen = tmp_path / "stolen.pem"
    stolen.write_bytes(b"")
    (tmp_path / "ca.key").symlink_to(stolen)
    with pytest.raises((ValueError, FileExistsError)):
        tls.init_certificates(tmp_path, ["alice"], overwrite=True)
    assert stolen.read_bytes() == b""


def test_checkpoint_files_are_0600(tmp_path) -> None:
    store = EpochCheckpoint(tmp_path, "alice", "fp")
    planted = tmp_path / "alice-e00001.npz.tmp"
    planted.write_bytes(b"")
    os.chmod(planted, 0o644)
    store.save(1, np.arange(3.0), {"loss": [1.0]})
    assert _mode(store.path(1)) == 0o600
    state, history = store.load(1)
    np.testing.assert_array_equal(state, np.arange(3.0))
    assert history["loss"] == [1.0]
