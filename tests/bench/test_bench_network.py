"""`vflsec bench network --links`: parties as processes over emulated links, the
cost model's prediction beside each measurement, and the report's answer."""
from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("grpc")
pytest.importorskip("private_set_intersection.python")

from vflsec.bench import runner  # noqa: E402
from vflsec.bench.config import shipped_config_text  # noqa: E402
from vflsec.bench.experiments.network import EXPERIMENT  # noqa: E402

CONTRACT_KEYS = ["method", "link", "bandwidth_bps", "rtt_s", "seconds", "predicted_seconds", "bytes", "rounds",
                 "compute_seconds"]


def _tiny_config(tmp_path):
    text = shipped_config_text("network")
    quick = text[text.index("[quick]"):]
    quick = re.sub(r'methods = \[[^\]]*\]', 'methods = ["plain", "hdp"]', quick)
    quick = re.sub(r"psi_sizes = \[[^\]]*\]", "psi_sizes = [100]", quick)
    path = tmp_path / "network.toml"
    path.write_text(text[:text.index("[quick]")] + quick)
    return path


def test_links_stage_rows_report_and_plot(tmp_path):
    out = tmp_path / "out"
    payload = runner.run(EXPERIMENT, {"quick": True, "out": out, "config": _tiny_config(tmp_path),
                                      "links": "loopback;20mbit,30ms"})
    rows = payload["links"]
    assert [(r["method"], r["link"]) for r in rows] == [("plain", "loopback"), ("plain", "20mbit,30ms"),
                                                        ("hdp", "loopback"), ("hdp", "20mbit,30ms")]
    for r in rows:
        assert list(r)[:len(CONTRACT_KEYS)] == CONTRACT_KEYS
        assert r["seconds"] > 0 and r["predicted_seconds"] > 0 and r["rounds"] > 0 and r["bytes"] > 0
    shaped = [r for r in rows if r["link"] != "loopback"]
    for r in shaped:
        # each message costs its sender at least one 30 ms round trip
        assert r["seconds"] > 0.03 * 2
        assert r["relayed_bytes"] > r["bytes"] * 0.5
        assert abs(r["prediction_error"]) < 0.5  # a sanity bound; the committed run reports the real errors
    loopback = [r for r in rows if r["link"] == "loopback"]
    assert all(r["calibration_run"] and r["predicted_seconds"] == pytest.approx(r["seconds"]) for r in loopback)
    assert rows[0]["vs_plain"] == 1.0 and rows[2]["vs_plain"] == pytest.approx(rows[2]["seconds"] / rows[0]["seconds"])
    saved = json.loads((out / "results.json").read_text())
    assert saved["links"] == json.loads(json.dumps(rows))
    report = (out / "report.md").read_text()
    assert "When is HE-VFL within 2-3x of plain VFL?" in report and "## Conclusion" in report
    # HDP-VFL's claim (papers/hdp_vfl.toml) is judged per HE method: neither ran here
    claims = [line for line in report.splitlines() if "| papers/hdp_vfl.toml |" in line]
    assert len(claims) == 2 and all("| 2 to 3x | **not measured** |" in line for line in claims)
    assert "Over emulated links: " in report.split("## Conclusion")[1]
    assert (out / "links.png").stat().st_size > 10_000


def test_bad_links_are_one_line_errors(capsys):
    from vflsec.cli import main

    with pytest.raises(SystemExit) as info:
        main(["bench", "network", "--quick", "--links", "moon"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown link 'moon'" in err[0]


def test_glm_report_cites_the_link_stage():
    from vflsec.bench.experiments.glm.verdicts import claims_section, network_citation

    def row(method, link, seconds, rounds):
        return {"method": method, "link": link, "seconds": seconds, "rounds": rounds,
                "vs_plain": None}

    rows = [row("plain", "loopback", 0.01, 8), row("plain", "wan", 0.2, 8),
            row("paillier", "loopback", 20.0, 32), row("paillier", "wan", 0.5, 32)]
    for r in rows:
        base = next(p for p in rows if p["method"] == "plain" and p["link"] == r["link"])
        r["vs_plain"] = r["seconds"] / base["seconds"]
    payload = {"links": rows, "links_job": {"rows": 100, "features_per_party": [2, 2], "batch_size": 10},
               "links_model_answer": [{"method": "paillier", "bandwidth_bps": 2e7, "rtt_s": None}]}
    runtime = [{"method": "plain", "n": 100, "epochs": 1, "seconds": 0.01},
               {"method": "paillier", "n": 100, "epochs": 1, "seconds": 20.0}]
    text = "\n".join(claims_section({}, (), runtime, network_citation(payload, "net.json")))
    assert "in memory" in text and "| 2,000x (1 cell) | <= 3x | **does not hold** |" in text and "net.json" in text
    assert "loopback 2e+03x, wan 2.5x -> the 2-3x claim holds on wan" in text
    assert "ratio of sequential messages (paillier 4x)" in text
    without = "\n".join(claims_section({}, (), runtime))
    assert "--network-results" in without


def test_he_claims_are_judged_on_the_link_closest_to_the_band():
    from vflsec.bench.experiments.network.links_report import links_verdicts

    def row(method, link, vs_plain):
        return {"method": method, "link": link, "vs_plain": vs_plain}

    payload = {"links": [row("paillier", "loopback", 50.0), row("paillier", "wan", 2.5), row("paillier", "far", 1.2),
                         row("ckks", "loopback", 40.0), row("ckks", "wan", 1.5)]}
    verdicts = {v.claim.quantity: v for v in links_verdicts(payload)}
    paillier, ckks = verdicts["links_vs_plain.paillier"], verdicts["links_vs_plain.ckks"]
    assert (paillier.measured, paillier.holds) == (2.5, True) and "on wan, the closest of 3 links" in paillier.note
    # faster than the claim on its best link is outside the band too
    assert (ckks.measured, ckks.holds) == (1.5, False) and "on wan" in ckks.note
    assert [v.word for v in links_verdicts({"links": []})] == ["not measured", "not measured"]


def test_a_partial_run_renders_what_finished(tmp_path):
    from vflsec.bench.experiments.network.report import render

    method = {"method": "plain", "n_samples": 10, "in_memory_train_s": 0.01, "network_train_s": 0.1,
              "network_party_total_s": 2.0, "network_psi_s": 1.0, "in_memory_payload_bytes": 100,
              "network_training_payload_bytes": 100, "network_wire_bytes_sent": 500, "max_abs_coef_diff": 0.0}
    payload = {"benchmark": "network", "quick": True, "seed": 0, "partial": True, "dataset": "synthetic",
               "machine": {"cpu": "x"}, "methods": [method], "psi": [], "links": [], "links_calibration": {}}
    assert render(payload, tmp_path) == ["report.md", "network.png"]
    report = (tmp_path / "report.md").read_text()
    assert "**Partial run**" in report and "| plain | 10 |" in report and "## Conclusion" in report


@pytest.mark.slow
def test_mpc_over_links_shapes_the_engine_link_and_fits_its_round_trips(tmp_path):
    """An MPC job's engine traffic goes through its parties' own relays ([network] engine_link): on a
    link with a round-trip time it takes far longer than on loopback, the model fitted on the longest
    RTT predicts the other link, and the report compares it with the HE methods link by link."""
    pytest.importorskip("spu")
    text = _tiny_config(tmp_path).read_text()
    quick = text[text.index("[quick]"):]
    links_table = quick[quick.index("[quick.links]"):]
    links_table = re.sub(r'methods = \[[^\]]*\]', 'methods = ["plain", "mpc_semi2k"]', links_table, count=1)
    path = tmp_path / "mpc.toml"
    path.write_text(text[:text.index("[quick]")] + quick[:quick.index("[quick.links]")] + links_table)
    out = tmp_path / "out"
    payload = runner.run(EXPERIMENT, {"quick": True, "out": out, "config": path,
                                      "links": "loopback;1gbit,4ms;1gbit,12ms"})
    rows = {r["link"]: r for r in payload["links"] if r["method"] == "mpc_semi2k"}
    assert list(rows) == ["loopback", "1gbit,4ms", "1gbit,12ms"]
    for r in rows.values():
        assert list(r)[:len(CONTRACT_KEYS)] == CONTRACT_KEYS and r["engine_model"]
    fit = payload["links_calibration"]["mpc_semi2k"]
    assert fit["fitted_on"] == "1gbit,12ms" and rows["1gbit,12ms"]["calibration_run"]
    assert rows["loopback"]["calibration_run"] and not rows["1gbit,4ms"]["calibration_run"]
    # 5 engine steps of a sigmoid each: dozens of sequential round trips, which the shaped engine link charges
    assert fit["engine_round_trips"] > 50
    assert rows["1gbit,12ms"]["seconds"] > rows["loopback"]["seconds"] + 50 * 0.012
    assert rows["1gbit,4ms"]["seconds"] < rows["1gbit,12ms"]["seconds"]
    assert abs(rows["1gbit,4ms"]["prediction_error"]) < 0.5  # a sanity bound; the committed run has the real errors
    # the engine's bytes (both ways, TLS included) dwarf what the channel's relays carried
    assert rows["loopback"]["bytes"] > 5 * rows["loopback"]["relayed_bytes"] > 0
    report = (out / "report.md").read_text()
    conclusion = report.split("## Conclusion")[1]
    assert "Secret sharing (mpc_semi2k) against HE, same job and links, measured: loopback" in conclusion
    assert "| mpc_semi2k | " in report and "engine round trips" in report


def test_mpc_methods_without_the_engine_are_labelled_not_run(tmp_path, monkeypatch):
    from vflsec.bench.experiments.network import links

    real = links.importlib.util.find_spec
    monkeypatch.setattr(links.importlib.util, "find_spec", lambda name, *a: None if name == "spu" else real(name, *a))
    text = _tiny_config(tmp_path).read_text()
    head, quick = text[:text.index("[quick]")], text[text.index("[quick]"):]
    table = quick[quick.index("[quick.links]"):]
    table = re.sub(r'methods = \[[^\]]*\]', 'methods = ["plain", "mpc_cheetah"]', table, count=1)
    path = tmp_path / "no-spu.toml"
    path.write_text(head + quick[:quick.index("[quick.links]")] + table)
    out = tmp_path / "out"
    payload = runner.run(EXPERIMENT, {"quick": True, "out": out, "config": path, "links": "loopback"})
    assert [r["method"] for r in payload["links"]] == ["plain"]
    assert payload["links_not_run"] == {"mpc_cheetah": 'not run (needs the mpc extra: pip install ".[mpc]")'}
    assert 'mpc_cheetah: not run (needs the mpc extra: pip install ".[mpc]").' in (out / "report.md").read_text()
