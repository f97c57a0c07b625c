"""What ``vflsec party`` shows while a person waits and where its files are (issue 37, items 4 and 8):
PSI's progress lines are spaced and estimate the time left, and the paths of a party file come out
without ``x/..`` steps unless a symlinked folder makes them mean another file."""
from __future__ import annotations

import logging
import os

import pytest

from vflsec.runtime import party
from vflsec.runtime.config import load_party_config


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_psi_progress_is_one_line_every_few_seconds_with_the_time_left(monkeypatch, caplog):
    clock = _Clock()
    monkeypatch.setattr(party.time, "perf_counter", clock)
    progress = party._PsiProgress("bank", every=5.0)
    with caplog.at_level(logging.INFO, logger="vflsec.network"):
        for done in range(1, 41):  # 40 buckets, one a second: a line at most every 5 s
            clock.now += 1.0
            progress("insurer", done, 40)
        clock.now += 1.0
        progress("broker", 1, 3)  # a new two-party run starts its own clock
        clock.now += 6.0
        progress("broker", 2, 3)
    lines = [r.getMessage() for r in caplog.records]
    # from the start (100 s); the time left at the pace after the first bucket (1 s each)
    assert lines[0] == "party 'bank': PSI with 'insurer': 6/40 buckets, 6 s, about 34 s left"
    assert lines[1] == "party 'bank': PSI with 'insurer': 11/40 buckets, 11 s, about 29 s left"
    assert len([line for line in lines if "'insurer'" in line]) == 7  # 6, 11, ..., 36 (none at the end)
    # the second run starts when the first one ended (140 s); its buckets take 6 s
    assert lines[-1] == "party 'bank': PSI with 'broker': 2/3 buckets, 7 s, about 6 s left"


def _party_file(folder, output):
    folder.mkdir(parents=True)
    path = folder / "party.toml"
    path.write_text(f'[party]\nname = "bank"\nlisten = "127.0.0.1:5000"\njob = "../../job.toml"\n'
                    f'output = "{output}"\n[peers]\ninsurer = "127.0.0.1:5001"\n')
    return path


def test_party_file_paths_lose_their_dot_dot_steps(tmp_path):
    cfg = load_party_config(_party_file(tmp_path / "cfg" / "x", "../../out/bank.json"))
    assert cfg.output == tmp_path / "out" / "bank.json" and cfg.job == tmp_path / "job.toml"
    assert ".." not in str(cfg.output)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_a_dot_dot_after_a_symlinked_folder_is_kept(tmp_path):
    (tmp_path / "real" / "deep").mkdir(parents=True)
    (tmp_path / "cfg").mkdir()
    os.symlink(tmp_path / "real" / "deep", tmp_path / "cfg" / "link")
    cfg = load_party_config(_party_file(tmp_path / "cfg" / "link" / "x", "../../out/bank.json"))
    # cfg/link/x/../../out is real/out on disk (not cfg/out): the path stays as written
    assert os.path.realpath(cfg.output) == str((tmp_path / "real" / "out" / "bank.json").resolve())
