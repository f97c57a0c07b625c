"""``vflsec bench he``: a tiny configuration end to end, the old-path patch, CLI errors."""
import json
import math

import numpy as np
import pytest

pytest.importorskip("phe")
pytest.importorskip("gmpy2")
pytest.importorskip("tenseal")

from vflsec.bench import he as bench_he  # noqa: E402

TINY = dict(n_exp=6, n_add=24, n_mul=8, dot_rows=12, dot_cols=3, repeats=1, min_total=0.0, max_total=0.5,
            ckks_rows=32, tenseal_matmul_rows=8, epoch_n=60, epoch_batch=30)


def _positive(value):
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@pytest.mark.timeout(120)
def test_tiny_run_writes_strict_json_with_finite_positive_rates(tmp_path):
    result = bench_he.run(quick=True, seed=3, out=tmp_path, sizes=TINY)
    saved = json.loads((tmp_path / "results.json").read_text())  # strict JSON: NaN would fail here
    assert (tmp_path / "report.md").read_text().rstrip().endswith(result["conclusion"])
    assert (tmp_path / "he.png").stat().st_size > 0
    for key in ("machine", "versions", "config", "load", "setup", "paillier", "ckks", "ckks_sizes", "epoch",
                "criteria", "conclusion", "randomness"):
        assert key in saved, key
    assert saved["config"]["seed"] == 3 and saved["config"]["key_bits"] == [2048]
    for when in ("start", "end"):
        assert len(saved["load"][when]["loadavg"]) == 3 and saved["load"][when]["uptime_s"] > 0

    rows = saved["paillier"]
    assert {r["op"] for r in rows} == set(bench_he.OPS)
    for r in rows:
        assert r["verified"] is True, r
        assert _positive(r["items_per_s"]) and _positive(r["wall_s"]), r
        if (r["workers"] or 1) == 1:  # in-process rows: CPU time from process_time
            assert _positive(r["items_per_cpu_s"]), r
    methods = {(r["op"], r["method"]) for r in rows}
    for op in bench_he.OPS:
        assert (op, "phe") in methods
    assert ("encrypt", "vflsec classic r^n (old path)") in methods
    assert ("X^T [[r]]", "vflsec per-product (old path)") in methods
    assert ("encrypt", "vflsec (DJN fixed base), 2 workers") in methods
    enc = next(r for r in rows if r["op"] == "encrypt" and r["method"] == "vflsec (DJN fixed base)")
    assert enc["vs_phe_cpu"] > 1  # the fixed base is faster than r^n even at this size
    table = next(s for s in saved["setup"] if s["what"].startswith("DJN fixed-base table, gmpy2"))
    assert table["entries"] == 128 * 256 and table["bytes"] == 128 * 256 * 512
    from vflsec.he import _paillier_math as pm
    if pm.native_available():  # the native table (79 digits of 52 bits per entry) and the gmpy2 baseline rows
        table = next(s for s in saved["setup"] if s["what"].startswith("DJN fixed-base table, native"))
        assert table["entries"] == 128 * 256 and table["bytes"] == 128 * 256 * 79 * 8
        assert {(op, "vflsec DJN fixed base, gmpy2") for op in ("encrypt", "re-randomize")} <= methods

    assert all(r["verified"] and _positive(r["items_per_s"]) for r in saved["ckks"])
    ckks_methods = {(r["op"], r["method"]) for r in saved["ckks"]}
    assert ("X^T [[r]]", "vflsec CKKS diagonal") in ckks_methods
    assert ("X^T [[r]]", "vflsec CKKS per-column (old path)") in ckks_methods
    assert isinstance(saved["criteria"]["ckks_dot_vs_per_column"]["met"], bool)
    ck = saved["ckks_sizes"]
    assert ck["galois_steps"] == [2 ** e for e in range(12)]
    assert 3 * ck["public_context_bytes"] < ck["per_column_public_context_bytes"]
    epoch = saved["epoch"]
    assert set(epoch["runs"]) == {"vflsec (DJN + Pippenger)", "vflsec old path (classic r^n + per-product)"}
    for run in epoch["runs"].values():
        assert _positive(run["cpu_s"]) and "crypto" in run["phases_s"]
    assert epoch["max_abs_coef_difference"] < 1e-9  # same model whatever the path
    assert _positive(epoch["cpu_ratio_old_over_new"])
    for key in ("encrypt_vs_phe", "dot_vs_phe", "epoch_cpu"):
        assert isinstance(saved["criteria"][key]["met"], bool)


def test_old_path_patch_is_scoped_and_matches_the_new_product():
    import warnings

    from vflsec.he import paillier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paillier.WeakKeyWarning)
        pk, sk = paillier.generate_keypair(2048)
        real_generate, real_dot = paillier.generate_keypair, paillier.EncryptedVector.dot
        rng = np.random.default_rng(0)
        r, X = rng.uniform(-1, 1, 6), rng.uniform(-2, 2, (6, 2))
        vec = pk.encrypt(r, processes=1)
        new = sk.decrypt_raw(vec.dot(X, processes=1), processes=1)
        with bench_he.old_paillier_path() as calls:
            old_pk, _ = paillier.generate_keypair(2048)
            assert old_pk.hs is None
            old = sk.decrypt_raw(vec.dot(X, processes=1), processes=1)
        assert calls == {"generate_keypair": 1, "dot": 1}
    assert old == new
    assert paillier.generate_keypair is real_generate and paillier.EncryptedVector.dot is real_dot


@pytest.mark.parametrize("argv, needle", [
    (["bench", "he", "--key-bits", "1024"], "--key-bits must be even integers >= 2048"),
    (["bench", "he", "--key-bits", "2049"], "--key-bits must be even integers >= 2048"),
    (["bench", "he", "--seed", "-1"], "--seed must be an integer >= 0"),
    (["bench", "he", "--seed", "abc"], "invalid int value"),
])
def test_cli_errors_are_one_line_with_exit_code_2(capsys, argv, needle):
    from vflsec.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vflsec bench he: error:") and needle in err[0], err
