"""Where a ``vflsec party`` data party keeps its aligned rows as Parquet shards.

A GLM job with ``shard_rows = S > 0`` in ``[job]`` ("plain" and "hdp") trains
on the shard-local schedule (:mod:`vflsec.vfl.schedule`). After the alignment
each data party writes its aligned rows once, ``S`` rows per Parquet file
(:class:`vflsec.glm.shards.ShardedTable`: float64 feature columns, and the
active party's label column), drops its table, labels and IDs (its output
needs only the IDs' SHA-256), and reads the shards back per batch, holding at
most two of them, each read once per epoch.

The files go to a folder of their own, ``vflsec-shards-<party>-XXXXXXXX``
(mode 0700: they hold the party's rows), made for the run inside
``[party] shard_dir``, else the folder of ``[party] output``, else the party
file's folder. The run deletes the folder when it ends, on failure too, unless
``[party] keep_shards = true`` (then the output names it). A process killed
outright (SIGKILL, power loss) leaves it behind: it holds nothing another run
reads, so delete it.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import CommandError
from .config import PartyConfig

__all__ = ["ShardFolder", "check_shard_parent", "shard_parent"]

SHARD_FOLDER_PREFIX = "vflsec-shards-"


def shard_parent(cfg: PartyConfig, config: Path) -> Path:
    """The folder the run's shard folder is made in: ``[party] shard_dir``, else the folder
    of ``[party] output``, else the party file's."""
    if cfg.shard_dir is not None:
        return Path(cfg.shard_dir)
    if cfg.output is not None:
        return Path(cfg.output).parent
    return Path(config).parent


def check_shard_parent(cfg: PartyConfig, config: Path) -> Path:
    """The folder of :func:`shard_parent`, made if missing; :class:`~vflsec.errors.CommandError`
    when it cannot be made or written (checked before the party contacts any peer)."""
    parent = shard_parent(cfg, config)
    where = "[party] shard_dir" if cfg.shard_dir is not None else (
        "the folder of [party] output" if cfg.output is not None else "the party file's folder")
    fix = (f"set [party] shard_dir in {config} to a folder this party can write, with room for its rows "
           "(about 8 bytes per value)")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"the shards' folder {parent} ({where}) cannot be made: "
                           f"{exc.strerror or exc}", fix) from exc
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise CommandError(f"the shards' folder {parent} ({where}) is not a folder this party can write", fix)
    return parent


@dataclass
class ShardFolder:
    """The run's own shard folder (mode 0700); :meth:`close` deletes it unless ``keep``."""

    path: Path
    keep: bool = False

    @classmethod
    def create(cls, parent: Path, party: str, *, keep: bool = False) -> "ShardFolder":
        """A new folder ``vflsec-shards-<party>-XXXXXXXX`` in ``parent`` (never one that exists)."""
        return cls(Path(tempfile.mkdtemp(prefix=f"{SHARD_FOLDER_PREFIX}{party}-", dir=parent)), keep)

    def close(self) -> Optional[Path]:
        """Delete the folder and its shards (None), or with ``keep`` leave them (their folder)."""
        if self.keep:
            return self.path
        shutil.rmtree(self.path, ignore_errors=True)
        return None
