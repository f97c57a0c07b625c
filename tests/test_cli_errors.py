"""The command line's error convention: an ordinary mistake is one line on
stderr, ``vflsec <cmd>: error: <what> -- <fix>``, exit status 2, no
traceback; ``--debug`` shows the traceback; Ctrl-C is one line and exit
status 130; ``vflsec bench glm --seed`` runs reproduce."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from vflsec import cli


def _one_line_error(capsys, argv, prefix):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert info.value.code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{prefix}: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("argv, prefix, needle", [
    (["bench", "glm", "--datasets", "nosuch"], "vflsec bench glm", "unknown dataset 'nosuch' -- choose from"),
    (["bench", "glm", "--datasets", "credit", "--data-dir", "/nonexistent"], "vflsec bench glm", "--data-dir"),
    (["bench", "glm", "--seed", "x"], "vflsec bench glm", "invalid int value: 'x' (see --help)"),
    (["bench", "glm", "--sed", "1"], "vflsec bench glm", "unrecognized arguments: --sed 1 (see --help)"),
    (["bench", "glm", "--seeds", "1"], "vflsec bench glm", "unrecognized arguments"),  # no prefix matching
    (["bench", "nosuch"], "vflsec bench", "invalid choice: 'nosuch'"),
    (["bench", "splitnn", "--seeds", "many"], "vflsec bench splitnn", "invalid int value"),
    (["party-data", "--dataset", "nosuch"], "vflsec party-data", "unknown dataset 'nosuch' -- choose one of"),
    (["party-data", "--dataset", "breast", "--parties", "3,3"], "vflsec party-data",
     "has 30 attributes -- give --parties counts"),
    (["party-data", "--dataset", "breast", "--parties", "3,x"], "vflsec party-data", "comma-separated"),
    (["party-data", "--dataset", "adult", "--data-dir", "/nonexistent"], "vflsec party-data",
     "not found (looked in"),
    (["party-data", "--dataset", "breast", "--keep", "0"], "vflsec party-data", "--keep must be in (0, 1]"),
    (["party", "--config", "/nonexistent/party.toml"], "vflsec party", "not found"),
    (["party"], "vflsec party", "the following arguments are required: --config"),
    (["certs", "init"], "vflsec certs init", "required: --parties"),
    (["link-relay", "--listen", "nohost", "--target", "127.0.0.1:1"], "vflsec link-relay", "error"),
])
def test_typical_mistakes_are_one_line_with_exit_status_2(capsys, tmp_path, argv, prefix, needle):
    argv = [a.replace("/nonexistent", str(tmp_path / "absent")) for a in argv]
    line = _one_line_error(capsys, argv, prefix)
    assert needle in line, line


def test_existing_certificates_without_force(capsys, tmp_path):
    pytest.importorskip("cryptography")
    argv = ["certs", "init", "--dir", str(tmp_path), "--parties", "a,b"]
    assert cli.main(argv) == 0
    capsys.readouterr()
    line = _one_line_error(capsys, argv, "vflsec certs init")
    assert "already exists -- pass --force" in line
    assert cli.main(argv + ["--force"]) == 0


def test_missing_extra_names_the_pip_install(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tenseal", None)  # import tenseal -> ImportError
    line = _one_line_error(capsys, ["bench", "he", "--quick", "--out", "unused"], "vflsec bench he")
    assert "'tenseal' is not installed" in line and 'pip install ".[he]"' in line


def test_party_without_the_net_extra(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "grpc", None)
    line = _one_line_error(capsys, ["party", "--config", str(tmp_path / "party.toml")], "vflsec party")
    assert "'grpc' is not installed" in line and 'pip install ".[net]"' in line


def test_keyboard_interrupt_is_one_line_and_status_130(capsys, monkeypatch):
    from vflsec.runtime import party_data

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(party_data, "run", interrupted)
    with pytest.raises(SystemExit) as info:
        cli.main(["party-data", "--dataset", "breast"])
    assert info.value.code == 130
    assert capsys.readouterr().err == "vflsec party-data: interrupted\n"


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["party-data", "--help"])
    assert info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 0.95)" in out and "(default: 0)" in out


def _vflsec(*args, **kw):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "vflsec.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, **kw)


def test_debug_shows_the_traceback_in_a_real_process():
    plain = _vflsec("party-data", "--dataset", "nosuch")
    assert plain.returncode == 2 and plain.stderr.count("\n") == 1 and "Traceback" not in plain.stderr
    for argv in (("--debug", "party-data", "--dataset", "nosuch"), ("party-data", "--dataset", "nosuch", "--debug")):
        debug = _vflsec(*argv)
        assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr
        assert "unknown dataset 'nosuch'" in debug.stderr


TINY_GLM = """
[quick]
datasets = ["breast"]
split_seeds = 1
noise_draws = 1
epsilons = [1.0]
cv_folds = 5
test_size = 0.2
seed = 0
selection_mean_candidates = 10.0
he_accuracy = {}
he_split_seeds = 1
he_key_bits = 2048
figure2 = false
learning_rate = 2.0
grid_batch_sizes = [256, 1024, 3200]
grid_epochs = [5, 10, 15]
grid_k = [0.1, 0.3, 1.0, 3.0, 10.0]
plain_extra_batch_sizes = [32, 64]
runtime_methods = ["plain", "hdp"]
runtime_features = [35, 73]
runtime_sizes = [400]
runtime_epochs = [1]
runtime_epochs_n = 400
runtime_batch_size = 100
runtime_he_batches = {}
runtime_paillier_3072 = false
spectrum_epsilons = [1.0]
spectrum_deltas = [1e-5]
central_sgd_sampling_rates = [0.0625]
central_sgd_epochs = [5]
central_sgd_lr = [0.5]
central_sgd_momentum = 0.9
central_output_lam_scales = [1.0]
central_objective_lams = [1e-3]
he_dp_batch_sizes = [1024]
he_dp_epochs = [2]
he_dp_k = [3.0]
he_dp_accuracy = {}
he_dp_accuracy_epsilons = {}
opacus_epsilons = []
quick = true
"""

# keys whose values are wall-clock measurements or describe the machine, not the experiment's numbers
TIMING_KEYS = ("seconds", "time", "_s", "phases", "machine", "load_average", "elapsed", "throughput", "per_s")


def _numbers(obj, key=""):
    if any(t in key for t in TIMING_KEYS):
        return None
    if isinstance(obj, dict):
        return {k: _numbers(v, k) for k, v in obj.items() if not any(t in k for t in TIMING_KEYS)}
    if isinstance(obj, list):
        return [_numbers(v, key) for v in obj]
    return obj


@pytest.mark.slow  # two full tiny runs, or a subprocess interrupted mid-run: seconds
def test_bench_glm_same_seed_gives_identical_results(tmp_path, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY_GLM)
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        assert cli.main(["bench", "glm", "--quick", "--seed", "0", "--config", str(config), "--out", str(out)]) == 0
        runs.append(json.loads((out / "results.json").read_text()))
    capsys.readouterr()
    a, b = runs
    assert a["accuracy"]["rows"] and any(r.get("epsilon") for r in a["accuracy"]["rows"])
    assert _numbers(a["accuracy"]) == _numbers(b["accuracy"])
    assert _numbers(a["config"]) == _numbers(b["config"]) and a["config"]["seed"] == 0
    assert _numbers(a["runtime"]) == _numbers(b["runtime"])


@pytest.mark.slow  # two full tiny runs, or a subprocess interrupted mid-run: seconds
def test_sigint_mid_run_writes_partial_results_and_exits_130(tmp_path):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY_GLM.replace("runtime_sizes = [400]", "runtime_sizes = [400, 4000, 40000]"))
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "vflsec.cli", "bench", "glm", "--quick", "--config", str(config),
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        # wait until the accuracy cells are done and the runtime grid runs, then Ctrl-C
        deadline = time.monotonic() + 120
        seen = ""
        while "runtime" not in seen and time.monotonic() < deadline and proc.poll() is None:
            seen += proc.stderr.read(1) or ""
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("vflsec bench glm: interrupted"), err
    saved = json.loads((out / "results.json").read_text())
    assert saved["partial"] is True and saved["accuracy"]["rows"]
    assert (out / "report.md").exists()
