"""`vflsec --version` and the non-benchmark commands load no benchmark code: a plain
`import vflsec` and every command but `vflsec bench` leave vflsec.bench unimported
(the startup time this saves is measured in benchmarks/README.md, not here)."""
import json
import subprocess
import sys

import pytest

_PROBE = """
import json, sys
import vflsec.cli
argv = sys.argv[1:]
try:
    vflsec.cli.main(argv)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("vflsec.bench") or m in ("matplotlib", "tqdm"))))
"""


def _loaded(*argv: str) -> list:
    out = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [(), ("--version",), ("party", "--help"), ("certs", "init", "--help"),
                                  ("link-relay", "--help"), ("party-data", "--help")])
def test_no_benchmark_module_is_imported_outside_vflsec_bench(argv):
    assert _loaded(*argv) == []


def test_import_vflsec_loads_no_benchmark_matplotlib_or_tqdm():
    code = ("import sys, vflsec; print(sorted(m for m in sys.modules if m.startswith('vflsec.bench') "
            "or m in ('matplotlib', 'tqdm')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_bench_help_imports_only_the_named_benchmark():
    loaded = _loaded("bench", "glm", "--help")
    experiments = {m.split(".")[3] for m in loaded if m.startswith("vflsec.bench.experiments.")}
    assert experiments == {"glm"}, loaded
    assert "matplotlib" not in loaded
