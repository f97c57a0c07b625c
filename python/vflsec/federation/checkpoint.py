"""Per-epoch training checkpoints of one party (the ``PartyData.checkpoint`` hook).

One ``.npz`` file per completed epoch, ``<party>-e<epoch>.npz``, written to
a temporary name and renamed, so a party killed mid-write leaves the
previous epochs intact. It holds the party's weights, its per-epoch history
and a fingerprint of the job and of the aligned IDs; a checkpoint whose
fingerprint differs (another job, other data) is never loaded. Files are
read with ``allow_pickle=False``.

Every epoch is kept because parties stop at slightly different points: on
resume the parties agree on the last epoch *all* of them completed.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

__all__ = ["EpochCheckpoint"]

_HISTORY_PREFIX = "history__"


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

    def save(self, epoch: int, coef: np.ndarray, history: Dict[str, List[float]]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        arrays = {
            "coef": np.asarray(coef, dtype=np.float64),
            "epoch": np.array(epoch, dtype=np.int64),
            "fingerprint": np.frombuffer(self.fingerprint.encode("utf-8"), dtype=np.uint8),
        }
        for key, values in history.items():
            arrays[_HISTORY_PREFIX + key] = np.asarray(values, dtype=np.float64)
        final = self.path(epoch)
        tmp = final.with_name(final.name + ".tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)

    def _read(self, path: Path):
        with np.load(path, allow_pickle=False) as data:
            if bytes(data["fingerprint"].tobytes()).decode("utf-8", "replace") != self.fingerprint:
                return None
            coef = np.array(data["coef"], dtype=np.float64)
            history = {key[len(_HISTORY_PREFIX):]: [float(v) for v in data[key]]
                       for key in data.files if key.startswith(_HISTORY_PREFIX)}
            return int(data["epoch"]), coef, history

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

    def load(self, epoch: int) -> Tuple[np.ndarray, Dict[str, List[float]]]:
        record = None
        path = self.path(epoch)
        if path.exists():
            record = self._read(path)
        if record is None:
            raise FileNotFoundError(f"party {self.party!r} has no checkpoint of this job for epoch {epoch} in "
                                    f"{self.directory}")
        _, coef, history = record
        return coef, history
