"""Per-epoch training checkpoints of one party (the ``PartyData.checkpoint`` hook).

One ``.npz`` file per completed epoch, ``<party>-e<epoch>.npz``, written to
a random temporary name (created exclusively, mode 0600: the file holds
model weights) and renamed, so a party killed mid-write leaves the
previous epochs intact. It holds the party's training state -- one weight
array (a GLM party's ``coef``) or named arrays (a split-learning party's
module and optimizer tensors) --, its per-epoch history and a fingerprint of
the job and of the aligned IDs; a checkpoint whose
fingerprint differs (another job, other data) is never loaded. Files are
read with ``allow_pickle=False``.

Every epoch is kept because parties stop at slightly different points: on
resume the parties agree on the last epoch *all* of them completed.

Beside the epochs, a party's privacy ledger (``<party>-accountant-<fingerprint>.json``:
a DP accountant's ``state_dict`` with the fingerprint, 0600, atomic; one file per job and
rows) records what its DP releases have spent over every run of the job on those rows
(:meth:`EpochCheckpoint.save_accountant`, written before a run's first
release, so a run interrupted before its first epoch checkpoint is counted
too); a resumed run, and a new run of the same job on the same rows, add their releases to it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from .private_files import private_open

__all__ = ["EpochCheckpoint"]


def _short(fingerprint: str) -> str:
    """16 hex digits naming a fingerprint in a file name (a fingerprint that is not hex is hashed)."""
    text = str(fingerprint)
    if re.fullmatch(r"[0-9a-f]{16,}", text):
        return text[:16]
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

_HISTORY_PREFIX = "history__"
_STATE_PREFIX = "state__"

# One weight array, or named arrays.
State = Union[np.ndarray, Mapping[str, np.ndarray]]


class EpochCheckpoint:
    def __init__(self, directory: os.PathLike, party: str, fingerprint: str):
        if not isinstance(fingerprint, str) or not fingerprint:
            raise ValueError("fingerprint must be a non-empty str")
        self.directory = Path(directory)
        self.party = party
        self.fingerprint = fingerprint
        self._pattern = re.compile(rf"^{re.escape(party)}-e(\d+)\.npz$")

    def path(self, epoch: int) -> Path:
        return self.directory / f"{self.party}-e{epoch:05d}.npz"

    def save(self, epoch: int, state: State, history: Dict[str, List[float]]) -> None:
        """Keep ``state`` (an array: float64 weights; a mapping: named arrays
        stored with their own dtypes) and ``history`` after ``epoch``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        arrays: Dict[str, Any] = {
            "epoch": np.array(epoch, dtype=np.int64),
            "fingerprint": np.frombuffer(self.fingerprint.encode("utf-8"), dtype=np.uint8),
        }
        if isinstance(state, Mapping):
            for key, value in state.items():
                arrays[_STATE_PREFIX + key] = np.asarray(value)
        else:
            arrays["coef"] = np.asarray(state, dtype=np.float64)
        for key, values in history.items():
            arrays[_HISTORY_PREFIX + key] = np.asarray(values, dtype=np.float64)
        final = self.path(epoch)
        # Weights: 0600, random exclusive temp name, never through a symlink.
        with private_open(final) as fh:
            np.savez(fh, **arrays)

    def _read(self, path: Path):
        with np.load(path, allow_pickle=False) as data:
            if bytes(data["fingerprint"].tobytes()).decode("utf-8", "replace") != self.fingerprint:
                return None
            state: State
            if "coef" in data.files:
                state = np.array(data["coef"], dtype=np.float64)
            else:
                state = {key[len(_STATE_PREFIX):]: np.array(data[key])
                         for key in data.files if key.startswith(_STATE_PREFIX)}
            history = {key[len(_HISTORY_PREFIX):]: [float(v) for v in data[key]]
                       for key in data.files if key.startswith(_HISTORY_PREFIX)}
            return int(data["epoch"]), state, history

    def epochs(self) -> List[int]:
        """Completed epochs with a checkpoint of this job and data, ascending."""
        if not self.directory.is_dir():
            return []
        found = []
        for entry in self.directory.iterdir():
            match = self._pattern.match(entry.name)
            if match is None:
                continue
            try:
                record = self._read(entry)
            except (OSError, ValueError, KeyError):
                continue  # unreadable or foreign file: not a usable checkpoint
            if record is not None and record[0] == int(match.group(1)):
                found.append(record[0])
        return sorted(found)

    def latest_epoch(self) -> int:
        """The last checkpointed epoch, -1 if none."""
        epochs = self.epochs()
        return epochs[-1] if epochs else -1

    def load(self, epoch: int) -> Tuple[State, Dict[str, List[float]]]:
        """``(state, history)`` saved after ``epoch`` (FileNotFoundError if
        there is none of this job and data)."""
        record = None
        path = self.path(epoch)
        if path.exists():
            record = self._read(path)
        if record is None:
            raise FileNotFoundError(f"party {self.party!r} has no checkpoint of this job for epoch {epoch} in "
                                    f"{self.directory}")
        _, state, history = record
        return state, history

    def discard_from(self, epoch: int) -> None:
        """Remove this party's epoch files of ``epoch`` and later: when a run
        starts (or resumes) at ``epoch``, later files are an earlier run's,
        which a later resume must not mix with this run's (the parties would
        continue from the states of different runs)."""
        if not self.directory.is_dir():
            return
        for entry in self.directory.iterdir():
            match = self._pattern.match(entry.name)
            if match is not None and int(match.group(1)) >= epoch and not entry.is_symlink() and entry.is_file():
                entry.unlink()

    # -- the privacy ledger ---------------------------------------------------------
    def accountant_path(self) -> Path:
        """The ledger of this job on these rows: one file per fingerprint, so another job run from the same
        folder keeps its own and never overwrites this one."""
        return self.directory / f"{self.party}-accountant-{_short(self.fingerprint)}.json"

    def save_accountant(self, state: Mapping[str, Any]) -> None:
        """Keep a DP accountant's JSON-able ``state`` (its ``state_dict()``) for this job and data."""
        self.directory.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"fingerprint": self.fingerprint, "accountant": dict(state)}, allow_nan=False)
        with private_open(self.accountant_path()) as fh:
            fh.write(text.encode("utf-8"))

    def load_accountant(self) -> Optional[Dict[str, Any]]:
        """The accountant state saved for this job and data; None if there is
        none, or the file is unreadable or of another job or data."""
        path = self.accountant_path()
        try:
            with open(path, "rb") as fh:
                record = json.loads(fh.read().decode("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("fingerprint") != self.fingerprint:
            return None
        state = record.get("accountant")
        return state if isinstance(state, dict) else None
