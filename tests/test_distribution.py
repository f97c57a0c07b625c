"""What a new user gets first: the install extras, the CI wheel step, and the
3-party example on built-in data (it must learn, as its header says)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
NAMES = ("active", "passive1", "passive2")


def test_all_extra_is_every_optional_dependency():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    union = {r for name in ("torch", "he", "net", "bench", "baselines", "data", "ray", "mpc") for r in extras[name]}
    assert set(extras["all"]) == union
    assert "torch==2.13.0" in extras["all"]
    assert set(extras["paillier"]) <= set(extras["he"])


def test_the_test_extras_install_the_mpc_engine_so_ci_runs_its_tests():
    """SPU pins numpy < 2: CI's suite runs with it installed (one environment, every extra's bounds
    resolved together), or the MPC tests would be skipped and the coexistence untested."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras["mpc"]) <= set(extras["test"])
    assert any(r.startswith("spu>=") for r in extras["mpc"]) and any(r.startswith("pyarrow<26") for r in extras["mpc"])


def test_the_core_install_needs_no_plotting_or_progress_bars():
    """matplotlib and tqdm are the bench extra's: `import vflsec` and every command but
    `vflsec bench` work without them (.ci/build-wheel imports vflsec in a core-only venv)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    assert "matplotlib" not in core and "tqdm" not in core
    assert {r.split(">")[0] for r in project["optional-dependencies"]["bench"]} == {"matplotlib", "tqdm"}


def test_dp_accounting_is_a_core_dependency():
    """Every DP protocol reports its epsilon through dp-accounting (HDP-VFL in the README's first
    command, the bench's DP spectrum): an extra that forgot it broke that command on a fresh venv."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(r.startswith("dp-accounting") for r in project["dependencies"])


def test_ci_runs_the_readme_first_command_as_written_in_a_fresh_venv():
    script = ROOT / ".ci" / "readme-first-command"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    assert ".ci/readme-first-command" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    first = readme.split("```bash\n", 1)[1].splitlines()[0]
    extracted = subprocess.run(["awk", "/^```bash$/ {inside = 1; next} inside {print; exit}", "README.md"],
                               cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    assert extracted == first and first.startswith("pip install") and "vflsec bench glm" in first


def test_build_wheel_script_is_an_executable_bash_script():
    script = ROOT / ".ci" / "build-wheel"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert "auditwheel" in text and "--only-binary" in text


def test_examples_ignore_what_their_commands_write():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = ["examples/certs/ca.key", "examples/certs/active.pem", "examples/data/active.csv",
             "examples/checkpoints/active/epoch-1.npz", "examples/out/active.json"]
    out = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True, text=True)
    assert sorted(out.stdout.split()) == sorted(paths)


def test_example_files_parse_and_agree():
    for name in NAMES:
        party = tomllib.loads((EXAMPLES / f"party-{name}.toml").read_text())["party"]
        assert party["name"] == name and party["data"] == f"data/{name}.csv"
        assert party["test_data"] == f"data/{name}-test.csv"
        assert (EXAMPLES / party["job"]).exists()
    for job in ("job.toml", "job-splitnn.toml"):
        text = (EXAMPLES / job).read_text()
        tomllib.loads(text)
        assert "--dataset breast" in text and "archive.ics.uci.edu" in text


@pytest.mark.slow
@pytest.mark.network
def test_breast_example_learns(tmp_path):
    """The commands of examples/job.toml's header, run as written (on free ports)."""
    pytest.importorskip("grpc")
    pytest.importorskip("private_set_intersection.python")
    from vflsec.runtime.launch import free_ports

    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("certs", "data", "out",
                                                                                   "checkpoints"))
    ports = dict(zip(NAMES, free_ports(3)))
    for name in NAMES:
        path = tmp_path / "examples" / f"party-{name}.toml"
        text = re.sub(r'listen = "127\.0\.0\.1:\d+"', f'listen = "127.0.0.1:{ports[name]}"', path.read_text())
        for other, port in ports.items():
            text = re.sub(rf'(^{other} = ")127\.0\.0\.1:\d+', rf"\g<1>127.0.0.1:{port}", text, flags=re.M)
        path.write_text(text)
    builtin = (EXAMPLES / "job.toml").read_text().split("UCI Adult variant")[0]  # the Breast commands
    header = [line[1:].strip() for line in builtin.splitlines()
              if line.startswith("#   vflsec") or line.startswith("#   python")]
    cli = [sys.executable, "-m", "vflsec"]
    run = dict(cwd=tmp_path, capture_output=True, text=True, timeout=300)
    for line in header:
        if line.startswith("vflsec party-data") or line.startswith("vflsec certs"):
            subprocess.run(cli + line.split("#")[0].split()[1:], check=True, **run)
    passives = [subprocess.Popen(cli + ["party", "--config", f"examples/party-{n}.toml"], cwd=tmp_path,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for n in NAMES[1:]]
    try:
        active = subprocess.run(cli + ["party", "--config", "examples/party-active.toml"], check=True, **run)
    finally:
        for p in passives:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
    evaluate = next(line for line in header if line.startswith("python examples/evaluate.py"))
    out = subprocess.run([sys.executable] + evaluate.split("#")[0].split()[1:], check=True, **run).stdout
    held_out, majority = map(float, re.search(r"held-out accuracy ([\d.]+) .*majority rate ([\d.]+)", out).groups())
    assert held_out >= majority + 0.15, out
    # The active party's summary line scores the same weights on the same held-out rows (evaluate = true).
    done = re.search(r"party 'active' done: held-out accuracy ([\d.]+) on 114 test rows \(majority rate ([\d.]+)\)",
                     active.stderr)
    assert done, active.stderr
    assert abs(float(done.group(1)) - held_out) < 1e-3 and abs(float(done.group(2)) - majority) < 1e-3
