"""The one benchmark runner (vflsec.bench.runner): configuration and overrides, the
results envelope, partial results on failure and Ctrl-C, --rerender, --print-config,
and the registry that finds each benchmark without importing the others."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import pytest

from vflsec.bench import runner
from vflsec.bench.config import spec
from vflsec.bench.errors import BenchConfigError, PartialRunError
from vflsec.bench.experiment import Experiment, Override, comma_list
from vflsec.bench.registry import EXPERIMENTS, load_experiment


@dataclasses.dataclass(frozen=True)
class _Grid:
    cells: int = dataclasses.field(metadata=spec(low=1))
    names: Tuple[str, ...] = dataclasses.field(metadata=spec(non_empty=True))
    seed: int = dataclasses.field(metadata=spec(low=0))


class _Demo(Experiment):
    name = "demo"
    overrides = (Override("--cells", "cells", int, "how many cells"),
                 Override("--names", "names", comma_list(str), "names"))

    def __init__(self, fail_at=None, interrupt_at=None):
        self.fail_at, self.interrupt_at = fail_at, interrupt_at
        self.rendered = []

    def load_grid(self, *, quick, path, options):
        return _Grid(cells=1 if quick else 4, names=("a",), seed=0)

    def run_cells(self, grid, options, result):
        result["cells"] = []
        for i in range(grid.cells):
            if i == self.fail_at:
                raise RuntimeError("cell failed")
            if i == self.interrupt_at:
                raise KeyboardInterrupt
            result["cells"].append({"i": i, "seed": grid.seed})

    def render(self, result, out):
        self.rendered.append(dict(result))
        (Path(out) / "report.md").write_text(f"{len(result['cells'])} cells, partial={result.get('partial')}\n")
        return ["report.md"]


def test_a_run_writes_the_envelope_the_cells_and_the_report(tmp_path):
    result = runner.run(_Demo(), {"out": tmp_path, "quick": False})
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved == json.loads(json.dumps(result))
    assert [c["i"] for c in saved["cells"]] == [0, 1, 2, 3]
    for key in ("benchmark", "command", "machine", "versions", "git", "seed", "quick", "load", "seconds", "config"):
        assert key in saved, key
    assert saved["benchmark"] == "demo" and saved["config"] == {"cells": 4, "names": ["a"], "seed": 0}
    assert set(saved["load"]) == {"start", "end"} and len(saved["load"]["start"]["loadavg"]) == 3
    assert "partial" not in saved and "_started" not in saved
    assert (tmp_path / "report.md").read_text().startswith("4 cells")


def test_overrides_and_seed_apply_on_top_of_the_configuration_and_are_validated(tmp_path):
    result = runner.run(_Demo(), {"out": tmp_path, "quick": True, "cells": 3, "names": ("x", "y"), "seed": 7})
    assert result["config"] == {"cells": 3, "names": ("x", "y"), "seed": 7} and result["seed"] == 7
    assert [c["seed"] for c in result["cells"]] == [7, 7, 7]
    with pytest.raises(BenchConfigError, match=r"--cells.*cells: expected an integer >= 1, got 0"):
        runner.run(_Demo(), {"out": tmp_path, "cells": 0})


def test_a_failure_mid_run_writes_the_finished_cells_marked_partial(tmp_path):
    demo = _Demo(fail_at=2)
    with pytest.raises(PartialRunError) as info:
        runner.run(demo, {"out": tmp_path})
    assert isinstance(info.value.__cause__, RuntimeError) and info.value.out == tmp_path
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["partial"] is True and [c["i"] for c in saved["cells"]] == [0, 1]
    assert "end" in saved["load"] and "seconds" in saved
    assert (tmp_path / "report.md").read_text() == "2 cells, partial=True\n"


def test_ctrl_c_writes_the_partial_results_and_exits_130(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        runner.run(_Demo(interrupt_at=1), {"out": tmp_path})
    assert info.value.code == 130
    assert "vflsec bench demo: interrupted; the finished cells are in" in capsys.readouterr().err
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["partial"] is True and len(saved["cells"]) == 1


def test_rerender_measures_nothing_and_leaves_the_results_untouched(tmp_path):
    runner.run(_Demo(), {"out": tmp_path})
    before = (tmp_path / "results.json").read_bytes()
    (tmp_path / "report.md").unlink()
    demo = _Demo(fail_at=0)  # would fail if it measured anything
    runner.run(demo, {"rerender": tmp_path})
    assert (tmp_path / "results.json").read_bytes() == before
    assert (tmp_path / "report.md").read_text().startswith("4 cells")
    with pytest.raises(BenchConfigError, match="--rerender .* cannot read"):
        runner.run(_Demo(), {"rerender": tmp_path / "missing"})


def test_the_registry_lists_every_benchmark_and_each_loads_its_own_experiment():
    assert set(EXPERIMENTS) == {"kernels", "glm", "network", "splitnn", "privacy", "he", "scale", "trees"}
    for name in EXPERIMENTS:
        experiment = load_experiment(name)
        assert experiment.name == name
        # the shipped grid exists and parses through the experiment's own loader
        assert experiment.load_grid(quick=True, path=None, options={}) is not None
    with pytest.raises(KeyError, match="unknown benchmark 'nosuch'"):
        load_experiment("nosuch")


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_importing_a_benchmark_loads_no_heavy_dependency(name):
    code = (f"import sys; import vflsec.bench.experiments.{name}; "
            "print(sorted(m for m in ('matplotlib', 'tqdm', 'torch', 'tenseal', 'phe', 'gmpy2', 'grpc', 'sklearn') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
