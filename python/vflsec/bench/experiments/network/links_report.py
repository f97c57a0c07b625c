"""The link stage's part of the network report: measured vs predicted times per
method and link, the cost model's error, the DP/HE-to-plain ratios against
bandwidth, and the answer to "when is HE-VFL within 2-3x of plain VFL?".

HDP-VFL's claim that HE-VFL is 2-3x slower than plain VFL is data: one
``[[claims]]`` table per HE method in ``vflsec/bench/papers/hdp_vfl.toml``
(quantity ``links_vs_plain.<method>``, op ``between``), judged by
:mod:`vflsec.bench.claims` (:func:`links_verdicts`); its band is also the
one the tables, the conclusion and the plot show (:func:`claimed_band`)."""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ...claims import Claim, Verdict, judge, load_claims, verdict_table
from ...common import markdown_table, n_label, pyplot, save_figure
from ...errors import BenchConfigError

__all__ = ["HE_METHODS", "claimed_band", "he_claims", "links_conclusion", "links_markdown", "links_plottable",
           "links_verdicts", "model_errors", "mpc_against_he_over_links", "plot_links"]

PAPER = "hdp_vfl"
QUANTITY = "links_vs_plain"  # the claims' quantity: links_vs_plain.<method>
HE_METHODS = (("paillier", "Paillier"), ("ckks", "CKKS"))


def he_claims() -> Dict[str, Claim]:
    """Per HE method, HDP-VFL's claim judged over the emulated links (``papers/hdp_vfl.toml``)."""
    claims = {c.quantity.split(".", 1)[1]: c for c in load_claims(PAPER) if c.quantity.startswith(QUANTITY + ".")}
    missing = [m for m, _ in HE_METHODS if m not in claims]
    if missing:
        raise BenchConfigError(f"papers/{PAPER}.toml: no [[claims]] with quantity {QUANTITY}.{missing[0]} -- the "
                               "network report judges HDP-VFL's 2-3x claim per HE method over the links")
    return claims


def claimed_band() -> Tuple[float, float]:
    """(low, high) of the claims' band, the ratio to plain VFL the paper claims for HE-VFL."""
    bands = {(c.low, c.high) for c in he_claims().values()}
    if len(bands) != 1 or any(c.op != "between" for c in he_claims().values()):
        raise BenchConfigError(f"papers/{PAPER}.toml: the {QUANTITY}.* claims must all be op 'between' with the "
                               "same low and high -- the report draws one band")
    low, high = bands.pop()
    return float(low), float(high)  # type: ignore[arg-type]  # set for op "between"


def _closest_to_band(ratios: Dict[str, float], low: float, high: float) -> Optional[Tuple[str, float]]:
    """The (link, ratio) nearest the band (a ratio inside it is at distance 0; on a log scale)."""
    def distance(r: float) -> float:
        return 0.0 if low <= r <= high else min(abs(math.log(r / low)), abs(math.log(r / high)))

    usable = {link: r for link, r in ratios.items() if r is not None and r > 0}
    if not usable:
        return None
    link = min(usable, key=lambda k: distance(usable[k]))
    return link, usable[link]


def links_verdicts(payload: Dict[str, Any]) -> List[Verdict]:
    """HDP-VFL's claim for each HE method, judged on the measured link where the
    method's time over plain VFL's comes closest to the claimed band: the claim
    holds if any measured link puts it in the band."""
    claims = he_claims()
    measured: Dict[str, Optional[float]] = {}
    notes: Dict[str, str] = {}
    for method, claim in claims.items():
        ratios = {r["link"]: r.get("vs_plain") for r in payload.get("links") or [] if r["method"] == method}
        closest = _closest_to_band(ratios, float(claim.low), float(claim.high))  # type: ignore[arg-type]
        measured[claim.quantity] = None if closest is None else closest[1]
        if closest is not None:
            notes[claim.id] = f"{method} on {closest[0]}, the closest of {len(ratios)} link{'s' * (len(ratios) != 1)}"
    return judge(list(claims.values()), measured, notes)


def _bw(bps: Optional[float]) -> str:
    if bps is None:
        return "unshaped"
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps:g} bit/s"


def _links(payload: Dict[str, Any]) -> List[str]:
    return [p["link"] for p in payload.get("links_profiles", [])]


def model_errors(payload: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """Per method: the median |prediction error| over the shaped links (the
    loopback run calibrates the model, so it is not a prediction) and how many
    links are under 15%."""
    out: Dict[str, Dict[str, Any]] = {}
    for r in payload["links"]:
        if r.get("calibration_run") or r.get("prediction_error") is None:
            continue
        entry = out.setdefault(r["method"], {"errors": {}})
        entry["errors"][r["link"]] = r["prediction_error"]
    for entry in out.values():
        errors = [abs(e) for e in entry["errors"].values()]
        entry["median_abs_error"] = statistics.median(errors) if errors else None
        entry["links_under_15pct"] = sum(e < 0.15 for e in errors)
    return out


def _verdict(ratio: Optional[float], high: float) -> str:
    if ratio is None:
        return "n/a"
    return "yes" if ratio <= high else "no"


def links_markdown(payload: Dict[str, Any]) -> List[str]:
    low, high = claimed_band()
    rows = payload["links"]
    job = payload.get("links_job", {})
    cal = payload.get("links_calibration", {})
    table = [[r["method"], r["link"], _bw(r["bandwidth_bps"]), f"{r['rtt_s'] * 1e3:g}", f"{r['seconds']:.3f}",
              f"{r['predicted_seconds']:.3f}",
              "calibration" if r.get("calibration_run") else f"{100 * r['prediction_error']:+.1f}%",
              r["bytes"], r["rounds"], f"{r['compute_seconds']:.3f}",
              "n/a" if r.get("communication_share") is None else f"{100 * r['communication_share']:.0f}%",
              "n/a" if r.get("vs_plain") is None else f"{r['vs_plain']:.2f}"] for r in rows]
    errors = model_errors(payload)
    error_rows = [[m, ", ".join(f"{link} {100 * e:+.1f}%" for link, e in v["errors"].items()),
                   "n/a" if v["median_abs_error"] is None else f"{100 * v['median_abs_error']:.1f}%",
                   f"{v['links_under_15pct']} of {len(v['errors'])}"] for m, v in errors.items()]
    cal_rows = [[m, f"{c['in_memory_seconds']:.3f}", f"{1e3 * c['message_seconds']:.2f}",
                 f"{c['compute_scale']:.3f}"] for m, c in cal.items() if c.get("model") != "engine"]
    engine_rows = [[m, f"{c['loopback_seconds']:.3f}", f"{c['bytes_per_direction'] / 1e6:.1f}",
                    c.get("fitted_on") or "n/a", f"{c['engine_round_trips']:.0f}"]
                   for m, c in cal.items() if c.get("model") == "engine"]
    mpc = [m for m in dict.fromkeys(r["method"] for r in rows) if m.startswith("mpc_")]
    by = {(r["method"], r["link"]): r for r in rows}
    claim_rows = []
    for link in _links(payload):
        plain = by.get(("plain", link))
        row = [link, _bw(plain["bandwidth_bps"]) if plain else "", f"{plain['seconds']:.3f}" if plain else "n/a"]
        for method in ("hdp", "paillier", "ckks", *mpc):
            r = by.get((method, link))
            ratio = None if r is None else r.get("vs_plain")
            if ratio is None:
                row.append("n/a")
            elif method not in ("paillier", "ckks"):
                row.append(f"{ratio:.2f}x")
            else:
                row.append(f"{ratio:.2f}x (within {high:g}x: {_verdict(ratio, high)})")
        claim_rows.append(row)
    answer_rows = [[a["method"], _bw(a["bandwidth_bps"]),
                    "not below 2 s" if a["rtt_s"] is None else f"{a['rtt_s'] * 1e3:.0f} ms"]
                   for a in payload.get("links_model_answer", [])]
    lines = [
        "## Over emulated links (`--links`)",
        "",
        f"The job: {len(job.get('parties', []))} parties {job.get('parties')}, {job.get('dataset')} data with "
        f"{job.get('features_per_party')} features per party, {job.get('rows')} rows per party before the ID "
        f"overlap, batch {job.get('batch_size')}, {job.get('epochs')} epoch(s) ({job.get('paillier_epochs')} for "
        f"Paillier), {job.get('key_bits')}-bit HE keys: the shape of `bench glm`'s runtime grid (35 + 73 features, "
        "batch 3200, n = 10,000 at one epoch) where the full grid is run, at one size only. Every party is its own "
        "`vflsec party` process (gRPC, mutual TLS); each party-to-party connection goes through its own "
        "`vflsec link-relay` on 127.0.0.1 (bandwidth per direction, RTT/2 each way). `seconds` is the slowest "
        "party's training time (after connection set-up and PSI alignment).",
        "",
        "The cost model (`vflsec.bench.experiments.network.cost_model`) replays the in-memory run's messages "
        "with their dependencies over each link; one parameter per method is fitted on the loopback run, which goes "
        "through the same relays unshaped (a fixed cost per message: gRPC, TLS and the relays' own hand-offs; "
        "or the compute scale where the single-process in-memory run computed more slowly than separate "
        "processes), so loopback rows are calibration, not predictions. `bytes` and `rounds` are "
        "the model's wire bytes (payload, envelope, HTTP/2 and TLS framing) and messages (each costs its "
        "sender one round trip: sends are acknowledged). The communication share is the part of the measured "
        "time not covered by the slowest party's compute.",
        "",
    ] + ([
        "Secret-sharing MPC rows (" + ", ".join(mpc) + ", protection \"mpc\" on SPU): most of their bytes cross the "
        "engine's own link, which the parties' engine relays shape to the same profile (`[network] engine_link`) "
        "and which no in-memory record sees. Their model is the loopback run's time plus R round trips plus the "
        "busier direction's bytes over the bandwidth; R, the engine's sequential round trips, is fitted on the "
        "shaped link of the longest RTT, so that row and loopback are calibration and the other links are "
        "predictions. Their `bytes` are both directions' engine and channel bytes on the wire (TLS included), "
        "`rounds` the fitted R, `compute s` the loopback run's time.",
        "",
    ] if mpc else []) + [
        markdown_table(["method", "link", "bandwidth", "RTT ms", "seconds", "predicted s", "model error", "bytes",
                        "rounds", "compute s", "comm. share", "vs plain"], table),
        "",
        markdown_table(["method", "link", "bandwidth", "RTT ms", "seconds", "predicted s", "model error", "bytes",
                        "rounds", "compute s", "comm. share", "vs plain"], table),
        "",
        "### Cost model error (shaped links; target: median under 15% on at least three profiles)",
        "",
        markdown_table(["method", "error per link", "median |error|", "links under 15%"], error_rows),
        "",
        markdown_table(["method", "in-memory s", "fitted ms per message", "fitted compute scale"], cal_rows),
        "",
    ] + ([markdown_table(["MPC method", "loopback s", "MB per direction", "rounds fitted on", "engine round trips"],
                         engine_rows), ""] if engine_rows else []) + [
        f"### When is HE-VFL within {low:g}-{high:g}x of plain VFL? (HDP-VFL's claim)",
        "",
        markdown_table(["link", "bandwidth", "plain s", "HDP / plain", "Paillier / plain", "CKKS / plain"]
                       + [f"{m} / plain" for m in mpc], claim_rows),
        "",
        f"HDP-VFL's claim (`papers/{PAPER}.toml`), judged for each HE method: it holds if some measured link puts "
        f"the method's training time at {low:g}-{high:g}x plain VFL's; the measured value is the ratio on the link "
        "closest to that band.",
        "",
        verdict_table(links_verdicts(payload)),
        "",
        "Beyond the measured links, the cost model's extrapolation (a prediction, not a measurement): the "
        f"smallest round-trip time at which each method's predicted training time falls within {high:g}x plain "
        "VFL's.",
        "",
        markdown_table(["method", "bandwidth", f"RTT needed for <= {high:g}x plain (model)"], answer_rows),
        "",
    ] + (["![ratios and bytes](links.png)", ""] if links_plottable(payload) else [])
    for method, why in (payload.get("links_not_run") or {}).items():
        lines += [f"{method}: {why}.", ""]
    return lines


def links_conclusion(payload: Dict[str, Any]) -> str:
    """The link stage's part of the report's Conclusion, from its rows."""
    return _conclusion(payload, model_errors(payload), {(r["method"], r["link"]): r for r in payload["links"]})


def links_plottable(payload: Dict[str, Any]) -> bool:
    """Whether some method other than plain was measured on at least 2 links (the plot's condition)."""
    rows = [r for r in payload.get("links") or [] if r.get("vs_plain") is not None and r["method"] != "plain"]
    return any(sum(r["method"] == m for r in rows) >= 2 for m in {r["method"] for r in rows})


def mpc_against_he_over_links(payload: Dict[str, Any]) -> List[str]:
    """Per secret-sharing MPC method of the link stage, one sentence: its measured training time on
    each link beside Paillier's and CKKS's, and which of them is fastest there (equal protection: none
    of them releases more than the model)."""
    rows = payload.get("links") or []
    by = {(r["method"], r["link"]): r for r in rows}
    links = _links(payload)
    out = []
    for mpc in dict.fromkeys(r["method"] for r in rows if r["method"].startswith("mpc_")):
        parts, fastest = [], []
        ahead: Dict[str, List[str]] = {"paillier": [], "ckks": []}
        behind: Dict[str, List[str]] = {"paillier": [], "ckks": []}
        for link in links:
            times = {m: by[(m, link)]["seconds"] for m in ("paillier", "ckks", mpc) if (m, link) in by}
            if mpc not in times:
                continue
            parts.append(f"{link} {times[mpc]:.3g} s (" + ", ".join(f"{m} {t:.3g} s" for m, t in times.items()
                                                                   if m != mpc) + ")")
            fastest.append(f"{link} {min(times, key=lambda m: times[m])}")
            for he in ("paillier", "ckks"):
                if he in times:
                    (ahead if times[mpc] < times[he] else behind)[he].append(link)
        rounds = (payload.get("links_calibration") or {}).get(mpc, {})
        if parts:
            versus = [f"than {he} on {', '.join(ahead[he]) or 'no link'}" for he in ("paillier", "ckks")
                      if ahead[he] or behind[he]]
            out.append(f"Secret sharing ({mpc}) against HE, same job and links, measured: " + "; ".join(parts)
                       + ". Fastest per link: " + ", ".join(fastest) + ". " + mpc + " is faster "
                       + " and ".join(versus) + "."
                       + (f" Its engine makes about {rounds['engine_round_trips']:.0f} sequential round trips "
                          f"(fitted on {rounds['fitted_on']}), against the HE methods' "
                          + ", ".join(f"{m} {by[(m, links[0])]['rounds']}" for m in ("paillier", "ckks")
                                      if (m, links[0]) in by) + " messages: round trips are what make it slow on "
                          "long links." if rounds.get("engine_round_trips") is not None and rounds.get("fitted_on")
                          else ""))
    return out


def _conclusion(payload: Dict[str, Any], errors: Dict[str, Dict[str, Any]], by) -> str:
    low, high = claimed_band()
    parts = []
    links = _links(payload)
    for method, name in HE_METHODS:
        within = [link for link in links if (by.get((method, link)) or {}).get("vs_plain") is not None
                  and by[(method, link)]["vs_plain"] <= high]
        ratios = [f"{link} {by[(method, link)]['vs_plain']:.1f}x" for link in links
                  if (by.get((method, link)) or {}).get("vs_plain") is not None]
        if not ratios:
            continue
        if within:
            parts.append(f"{name} HE-VFL is within {high:g}x of plain VFL on: {', '.join(within)} "
                         f"(ratios: {', '.join(ratios)}).")
        else:
            parts.append(f"{name} HE-VFL is never within {high:g}x of plain VFL here (ratios: {', '.join(ratios)}): "
                         "the claim does not hold for this job on these links.")
    parts += mpc_against_he_over_links(payload)
    good = [m for m, v in errors.items() if v["median_abs_error"] is not None and v["median_abs_error"] < 0.15
            and v["links_under_15pct"] >= 3]
    bad = [m for m in errors if m not in good]
    if errors:
        parts.append("The cost model predicts the emulated runs with a median error under 15% on at least three "
                     f"profiles for: {', '.join(good) or 'no method'}"
                     + (f"; not for: {', '.join(bad)}." if bad else "."))
    for method, name in HE_METHODS:
        measured = [(link, by[(method, link)]) for link in links if (method, link) in by]
        if len(measured) >= 2 and measured[0][1].get("vs_plain") and measured[-1][1].get("vs_plain"):
            first, last = measured[0], measured[-1]
            trend = "shrinks" if last[1]["vs_plain"] < first[1]["vs_plain"] else "grows"
            parts.append(f"From {first[0]} to {last[0]} the {name}/plain ratio {trend} "
                         f"({first[1]['vs_plain']:.1f}x to {last[1]['vs_plain']:.1f}x): communication is "
                         f"{100 * (last[1].get('communication_share') or 0):.0f}% of {name}'s time on {last[0]}"
                         + (" (mostly bytes: its keys and ciphertexts are large)" if trend == "grows" else
                            " (plain VFL's small messages pay the same round trips, so the gap narrows)") + ".")
    he_answers = [a for a in payload.get("links_model_answer", []) if a["method"] in ("paillier", "ckks")]
    needed = [a for a in he_answers if a["rtt_s"] is not None]
    if needed:
        parts.append(f"The cost model puts HE-VFL within {high:g}x of plain VFL only on links with round-trip times of "
                     + ", ".join(f"{a['rtt_s'] * 1e3:.0f} ms ({a['method']}, {_bw(a['bandwidth_bps'])})"
                                 for a in needed)
                     + f" or more (an extrapolation): the paper's {low:g}-{high:g}x describes a slow, latency-bound "
                       "network, not the cryptography.")
    elif he_answers:
        rounds = {r["method"]: r["rounds"] for r in payload["links"]}
        asymptote = ", ".join(f"{m} {rounds[m] / rounds['plain']:.1f}x" for m in ("paillier", "ckks")
                              if m in rounds and rounds.get("plain"))
        parts.append(f"The cost model does not put HE-VFL within {high:g}x of plain VFL at any round-trip time up to "
                     "2 s at 20 Mbit/s to 1 Gbit/s (an extrapolation): as the RTT grows, each method's time tends "
                     "to its number of messages times the RTT, so the ratio tends to the ratio of messages"
                     + (f" ({asymptote} here)" if asymptote else "") + ".")
    return " ".join(parts)


def plot_links(payload: Dict[str, Any], path: Path) -> bool:
    """Left: training time relative to plain VFL against bandwidth, one line per
    method measured on at least 2 links (log-log; the unshaped loopback run at the
    right edge), with the band of HDP-VFL's claim (2-3x, :func:`claimed_band`). Right: the wire bytes of
    each method's run (one run per method and link; bytes do not depend on the
    link, so the loopback run's, or the first link's). False, and no file, when
    no method has 2 links."""
    if not links_plottable(payload):
        return False
    rows = [r for r in payload["links"] if r.get("vs_plain") is not None and r["method"] != "plain"]
    methods = [m for m in dict.fromkeys(r["method"] for r in rows) if sum(r["method"] == m for r in rows) >= 2]
    plt = pyplot()
    shaped = [r["bandwidth_bps"] for r in rows if r["bandwidth_bps"] is not None]
    top = (max(shaped) if shaped else 1e9) * 10
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12.5, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    for method in methods:
        pts = sorted(((r["bandwidth_bps"] or top), r["vs_plain"], r["link"]) for r in rows if r["method"] == method)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{method} ({n_label(1, 'run/link')})")
        for x, y, link in pts:
            ax.annotate(link, (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
    low, high = claimed_band()
    ax.axhspan(low, high, color="tab:green", alpha=0.15, label=f"{low:g}-{high:g}x (HDP-VFL's claim)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("link bandwidth per direction, bit/s (rightmost: unshaped loopback)")
    ax.set_ylabel("training time / plain VFL's on the same link")
    ax.set_title("Cost of each protection relative to plain VFL, by link")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    wire: Dict[str, float] = {}
    for r in sorted(payload["links"], key=lambda r: r["bandwidth_bps"] is not None):  # loopback first
        wire.setdefault(r["method"], r["bytes"])
    names = list(wire)
    bx.bar(range(len(names)), [wire[m] for m in names], color=[f"C{i}" for i in range(len(names))],
           label=f"wire bytes of the run ({n_label(1, 'run/method')})")
    bx.set_xticks(range(len(names)), names)
    bx.set_yscale("log")
    bx.set_ylabel("bytes on the wire (log scale)")
    bx.set_title("Bytes of each method's run")
    bx.grid(axis="y", alpha=0.3)
    bx.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    return True
