"""``report.md`` and ``he.png`` of ``vflsec bench he``, from the results alone:
the targets vflsec set itself for this work (``papers/vflsec_targets.toml``,
judged by :mod:`vflsec.bench.claims` against ratios computed here from the
rows), the plain-words conclusion, the markdown report and the plot of rates
relative to phe."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ...claims import Claim, Verdict, judge, load_claims, verdict_table
from ...common import markdown_table, pyplot, save_figure
from ...envelope import load_text
from .ckks import CKKS_DOT, CKKS_DOT_OLD
from .paillier import OPS

__all__ = ["claims", "conclusion", "criteria_record", "plot", "render", "render_report", "verdicts"]

TARGETS = "vflsec_targets"
"""The claims file (``vflsec/bench/papers/vflsec_targets.toml``) whose ``he.*`` quantities this report judges."""
QUANTITY_PREFIX = "he."


def _find(rows: List[Dict[str, Any]], bits: int, op: str, method: str) -> Optional[Dict[str, Any]]:
    for r in rows:
        if r["key_bits"] == bits and r["op"] == op and r["method"] == method and r.get("verified"):
            return r
    return None


def _ratios(result: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The measured ratio behind each target (keyed like ``criteria`` in the JSON), with
    how it was measured: only those this run measured (Paillier-2048, 1 worker, per CPU-second)."""
    rows, epoch = result["paillier"], result.get("epoch")
    out: Dict[str, Dict[str, Any]] = {}
    for key, op, method in (("encrypt", "encrypt", "vflsec (DJN fixed base)"),
                            ("dot", "X^T [[r]]", "vflsec (Pippenger)")):
        ours = _find(rows, 2048, op, method)
        phe_row = next((r for r in rows if r["key_bits"] == 2048 and r["op"] == op and r["family"] == "phe"), None)
        if ours and phe_row and ours.get("items_per_cpu_s") and phe_row.get("items_per_cpu_s"):
            out[f"{key}_vs_phe"] = {"ratio": ours["items_per_cpu_s"] / phe_row["items_per_cpu_s"],
                                    "basis": "Paillier-2048, items per CPU-second, 1 worker each"}
        heu_row = _find(rows, 2048, op, "HEU ZPaillier")
        if ours and heu_row and ours.get("items_per_cpu_s") and heu_row.get("items_per_cpu_s"):
            two = _find(rows, 2048, op, method + ", 2 workers")
            out[f"{key}_vs_heu_zpaillier"] = {
                "ratio": ours["items_per_cpu_s"] / heu_row["items_per_cpu_s"],
                "basis": "Paillier-2048, items per CPU-second (vflsec 1 worker; HEU with its own thread pool)",
                "wall_ratio_2_workers": (two["items_per_s"] / heu_row["items_per_s"]) if two else None,
            }
    if epoch:
        out["epoch_cpu"] = {"ratio": epoch["cpu_ratio_old_over_new"],
                            "basis": f"one epoch, n = {epoch['n_samples']}, batch {epoch['batch_size']}, "
                                     "CPU seconds in-process, old / new"}
    # CKKS X^T [[r]]: the diagonal product against the per-column one it replaced, same run and values.
    ck = {r["method"]: r for r in result.get("ckks") or [] if r["op"] == "X^T [[r]]" and r.get("verified")}
    new, old = ck.get(CKKS_DOT), ck.get(CKKS_DOT_OLD)
    if new and old and new.get("items_per_cpu_s") and old.get("items_per_cpu_s"):
        out["ckks_dot_vs_per_column"] = {
            "ratio": new["items_per_cpu_s"] / old["items_per_cpu_s"],
            "basis": f"CKKS N = 8192, {new['case']}, items per CPU-second, in-process, same run"}
    return out


def claims() -> Tuple[Claim, ...]:
    """The targets this benchmark is judged against (the ``he.*`` claims of ``vflsec_targets.toml``)."""
    return tuple(c for c in load_claims(TARGETS) if c.quantity.startswith(QUANTITY_PREFIX))


def _key(claim: Claim) -> str:
    return claim.quantity[len(QUANTITY_PREFIX):]


def _not_measured(key: str, result: Dict[str, Any]) -> str:
    if "heu" in key and not result.get("heu_available"):
        return "sf-heu is not installed"
    if key == "ckks_dot_vs_per_column":
        return "no CKKS run"
    if key == "epoch_cpu":
        return "no epoch run"
    return "no Paillier-2048 run"


def verdicts(result: Dict[str, Any]) -> List[Verdict]:
    """Every target judged against this run's ratios (not measured where the run has no such row)."""
    ratios = _ratios(result)
    measured: Dict[str, Optional[float]] = {}
    notes: Dict[str, str] = {}
    for claim in claims():
        c = ratios.get(_key(claim))
        if c is None:
            notes[claim.id] = _not_measured(_key(claim), result)
            continue
        measured[claim.quantity] = c["ratio"]
        extra = ""
        if c.get("wall_ratio_2_workers") is not None:
            extra = f"; vflsec with 2 workers, per wall second: {c['wall_ratio_2_workers']:.3g}x"
        notes[claim.id] = c["basis"] + extra
    return judge(claims(), measured, notes)


def criteria_record(result: Dict[str, Any]) -> Dict[str, Any]:
    """``criteria`` as the JSON records it: per measured target its ratio, the threshold it
    was judged against, whether it was met, and how it was measured."""
    by_key = {_key(v.claim): v for v in verdicts(result)}
    out: Dict[str, Any] = {}
    for key, c in _ratios(result).items():
        v = by_key.get(key)
        out[key] = {"ratio": c["ratio"], "target": v.claim.threshold if v else None,
                    "met": v.holds if v else None, **{k: c[k] for k in c if k != "ratio"}}
    return out


def conclusion(result: Dict[str, Any]) -> str:
    """The plain-words conclusion of ``result``, every number from its rows."""
    rows, crit, epoch = result["paillier"], _ratios(result), result.get("epoch")
    parts = []
    enc, dot = crit.get("encrypt_vs_phe"), crit.get("dot_vs_phe")
    if enc and dot:
        parts.append(f"On one core, vflsec encrypts {enc['ratio']:.3g}x as many values per CPU-second as phe "
                     f"with the same 2048-bit modulus, and computes the encrypted product X^T [[r]] "
                     f"{dot['ratio']:.3g}x as fast.")
    heu_e, heu_d = crit.get("encrypt_vs_heu_zpaillier"), crit.get("dot_vs_heu_zpaillier")
    if heu_e and heu_d:
        def word(c):
            return "faster than" if c["ratio"] >= 1 else "slower than"
        parts.append(f"Against SecretFlow HEU's C++ ZPaillier, vflsec is {word(heu_e)} it at encryption "
                     f"({heu_e['ratio']:.3g}x per CPU-second) and {word(heu_d)} it at X^T [[r]] "
                     f"({heu_d['ratio']:.3g}x).")
    else:
        parts.append("HEU was not measured (sf-heu is not installed).")
    same = [r for r in rows if r["key_bits"] == 2048 and r["family"] == "vflsec" and (r["workers"] or 1) == 1
            and r["op"] in ("decrypt", "mul 41-bit", "mul 53-bit") and r.get("vs_phe_cpu")]
    if same:
        parts.append("Decryption and single ciphertext-times-plaintext products were not changed by this work and "
                     "run at about phe's speed (" + ", ".join(f"{r['op']}: {r['vs_phe_cpu']:.2g}x" for r in same)
                     + " per CPU-second).")
    add = _find(rows, 2048, "add", "vflsec")
    if add and add.get("vs_phe_cpu") and add["vs_phe_cpu"] < 0.8:
        parts.append(f"Ciphertext addition runs at only {add['vs_phe_cpu']:.2g}x phe's rate: vflsec multiplies "
                     "Python ints there, where phe uses gmpy2 (cheap beside the exponentiations, but a free gain).")
    one, two = _find(rows, 2048, "X^T [[r]]", "vflsec (Pippenger)"), _find(rows, 2048, "X^T [[r]]",
                                                                            "vflsec (Pippenger), 2 workers")
    if one and two and two["items_per_s"] < 1.3 * one["items_per_s"]:
        la = (((result.get("load") or {}).get("start") or {}).get("loadavg") or [None])[0]
        parts.append(f"Two workers gained little over one in this run (X^T [[r]]: "
                     f"{two['items_per_s'] / one['items_per_s']:.2g}x per wall second"
                     + (f"; load average {la:.2f} at the start" if la is not None else "")
                     + "): the second core was busy with other work, so compare the per-CPU-second rates.")
    if epoch:
        parts.append(f"A whole HE-VFL epoch (n = {epoch['n_samples']}, batch {epoch['batch_size']}) needs "
                     f"{epoch['cpu_ratio_old_over_new']:.3g}x less CPU time than with the old classic-r^n, "
                     f"per-product path, with the same model (largest coefficient difference "
                     f"{epoch['max_abs_coef_difference']:.2g}).")
    if result.get("ckks"):
        ck = {r["method"]: r for r in result["ckks"]}
        cc = crit.get("ckks_dot_vs_per_column")
        if cc:
            sizes = result.get("ckks_sizes", {})
            parts.append(f"vflsec's diagonal CKKS product computes X^T [[r]] {cc['ratio']:.3g}x as fast per "
                         "CPU-second as the per-column rotate-and-sum it replaces"
                         + (f", and its public context is {sizes['public_context_bytes'] / 2**20:.1f} MiB instead "
                            f"of {sizes['per_column_public_context_bytes'] / 2**20:.1f} MiB (only the Galois keys "
                            "of the power-of-two rotations)" if sizes.get("per_column_public_context_bytes") else "")
                         + ".")
        cd, pd = ck.get(CKKS_DOT), _find(rows, 2048, "X^T [[r]]", "vflsec (Pippenger)")
        if cd and pd and cd.get("items_per_cpu_s") and pd.get("items_per_cpu_s"):
            parts.append(f"vflsec's CKKS computes X^T [[r]] at {cd['items_per_cpu_s'] / pd['items_per_cpu_s']:.3g}x "
                         "the rate of Paillier-2048 per CPU-second (one ciphertext holds 4096 values), but its "
                         "decryptions are approximate and need noise flooding.")
    missed = [v.claim.statement for v in verdicts(result) if v.holds is False]
    parts.append("All done criteria measured here are met." if not missed else
                 "Not met in this run: " + ", ".join(missed) + ".")
    return " ".join(parts)


def _uptime_text(result: Dict[str, Any]) -> str:
    """``"; uptime 8.89 h at the start"`` (how long the machine had been up), or nothing."""
    up = (((result.get("load") or {}).get("start") or {}).get("uptime_s"))
    return f"; uptime {up / 3600:.2f} h at the start" if up else ""


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def render_report(result: Dict[str, Any]) -> str:
    cfg, m = result["config"], result["machine"]
    quick = result.get("quick", cfg.get("quick"))  # the envelope's; runs before it recorded it in the config
    out = [
        "# vflsec HE benchmark: Paillier and CKKS against phe and HEU\n",
        f"Machine: {m.get('cpu')}, {m.get('logical_cores')} logical cores. "
        f"{_sentence(load_text(result))}{_uptime_text(result)}. "
        f"Run time {result.get('seconds', 0):.0f} s, {'--quick' if quick else 'full'} configuration, "
        f"seed {cfg['seed']}.\n",
        "Plaintexts, matrices and training data come from the seed; keys and encryption randomness come from "
        "the OS CSPRNG by design, so rates vary slightly between runs on the same workload. Rates: items per "
        "wall second and per CPU-second. In-process rows (vflsec `processes=1`, phe, HEU) count CPU time with "
        "`time.process_time` (every thread of the process); 2-worker rows are timed in wall seconds, their CPU "
        "time is this process's plus the workers' (from /proc). `vs phe` divides by phe's rate on the same "
        "modulus (CPU: per CPU-second; wall: per wall second). Every row's result was decrypted (spot check; "
        "vflsec rows must match or the run stops, others are flagged under Notes).\n",
        "## Done criteria (as measured in this run)\n",
        "Targets vflsec set itself, judged against this run's ratios:\n",
        verdict_table(verdicts(result)),
        "",
    ]
    if result.get("partial"):
        out[2:2] = ["**This run stopped before its last row** (interrupted or failed): only the finished rows "
                    "are reported, and the targets of the missing ones are not measured.\n"]
    if result["notes"]:
        out += ["Notes:\n"] + [f"- {n}" for n in result["notes"]] + [""]
    out.append("## Paillier\n")
    out.append("Setup costs (offline, once per key; the fixed-base table once per key and process):\n")
    out.append(markdown_table(
        ["key bits", "what", "seconds", "entries", "MiB"],
        [[s["key_bits"], s["what"], s["seconds"], s.get("entries"),
          s["bytes"] / 2**20 if s.get("bytes") else None] for s in result["setup"]]))
    out.append("")
    for bits in cfg["key_bits"]:
        out.append(f"### {bits}-bit modulus\n")
        for op in OPS:
            rs = [r for r in result["paillier"] if r["key_bits"] == bits and r["op"] == op]
            if not rs:
                continue
            out.append(f"**{op}** ({rs[0]['case']}; items = {rs[0]['unit']}, {rs[0]['items']} per run)\n")
            out.append(markdown_table(
                ["method", "workers", "items/s", "items/CPU-s", "vs phe (CPU)", "vs phe (wall)", "runs"],
                [[r["method"], r["workers"] if r["workers"] else "own threads", r["items_per_s"],
                  r.get("items_per_cpu_s"), r.get("vs_phe_cpu"), r.get("vs_phe_wall"), r["samples"]]
                 for r in rs]))
            notes = sorted({r["note"] for r in rs if r.get("note")})
            if notes:
                out.append("\n" + "; ".join(notes) + ".")
            out.append("")
    if result.get("ckks"):
        ck = result["ckks_sizes"]
        out.append("## CKKS (vflsec over SEAL, via TenSEAL)\n")
        p = ck["parameters"]
        old_ctx = ""
        if ck.get("per_column_public_context_bytes"):
            old_ctx = (f"; the old path's TenSEAL context with its default {ck['per_column_galois_keys']} Galois "
                       f"keys: {ck['per_column_public_context_bytes'] / 2**20:.1f} MiB")
        out.append(f"N = {p['poly_modulus_degree']} ({p['slots']} slots), coefficient modulus "
                   f"{p['coeff_mod_bit_sizes']}, scale 2^{p['scale_bits']}. Keys and the Galois keys of the "
                   f"{len(ck.get('galois_steps', []))} power-of-two rotations the diagonal product uses: "
                   f"{ck['context_seconds']:.2f} s to make, public context {ck['public_context_bytes'] / 2**20:.1f} "
                   f"MiB on the wire (sent once){old_ctx}. `{CKKS_DOT_OLD}` is the product before the diagonal "
                   "layout (one TenSEAL rotate-and-sum per column, then packing), timed in the same run on the "
                   "same values.\n")
        out.append(markdown_table(
            ["op", "method", "case", "items/s", "items/CPU-s", "bytes", "max abs error"],
            [[r["op"], r["method"], r.get("case"), r["items_per_s"], r.get("items_per_cpu_s"), r.get("bytes"),
              r.get("max_abs_error")] for r in result["ckks"]]))
        out.append("")
        if "ckks_vector_bytes" in ck:  # recorded when the CKKS section finished
            out.append(f"Wire sizes for {ck['rows']} values and the {ck['cols']}-value product:\n")
            size_rows = [["CKKS (vflsec)", ck["ckks_vector_bytes"], ck["ckks_product_bytes"]]]
            size_rows += [[f"Paillier-{s['key_bits']}", s["vector_bytes"], s["product_bytes"]]
                          for s in result["paillier_sizes"]]
            out.append(markdown_table(["scheme", "encrypted vector bytes", "product bytes"], size_rows))
            out.append("")
    ep = result.get("epoch")
    if ep:
        out.append("## One HE-VFL epoch (Paillier-2048)\n")
        out.append(f"`VerticalLogisticRegression(protection='paillier', epochs=1, batch_size={ep['batch_size']}, "
                   f"key_bits=2048)` on `make_synthetic(n_samples={ep['n_samples']}, features_per_party=[10, 10])`, "
                   "two parties, in-process (`vflsec.he.set_num_processes(1)`): CPU seconds of every party thread. "
                   "The old path is patched in for this run only (`old_paillier_path`: keys without the DJN base, "
                   "so classic r^n encryption and re-randomization, and the per-product X^T [[r]]). Phase times "
                   "are `history_['time']` (wall seconds summed over the parties' threads; crypto = encryption, "
                   "decryption, homomorphic operations and (de)serialization).\n")
        table = []
        for label, run in ep["runs"].items():
            ph = run["phases_s"]
            table.append([label, run["cpu_s"], run["wall_s"], ph.get("crypto"), ph.get("compute"),
                          ph.get("messaging"), run["total_bytes"]])
        out.append(markdown_table(["path", "CPU s", "wall s", "crypto s", "compute s", "messaging s", "bytes"],
                                  table))
        out.append(f"\nOld / new: **{ep['cpu_ratio_old_over_new']:.3g}x** CPU, {ep['wall_ratio_old_over_new']:.3g}x "
                   f"wall; largest coefficient difference between the two models "
                   f"{ep['max_abs_coef_difference']:.2g} (same data and seed; encryption randomness cancels).\n")
    out.append("## Conclusion\n")
    out.append(conclusion(result))
    out.append("")
    return "\n".join(out)


_FAMILY_COLORS = {"vflsec": "tab:green", "vflsec-old": "tab:olive", "phe": "tab:gray", "heu": "tab:blue"}


def plot(result: Dict[str, Any], path: Path) -> None:
    plt = pyplot()
    from matplotlib.patches import Patch

    bits_list = result["config"]["key_bits"]
    has_epoch = bool(result.get("epoch"))
    panels = len(bits_list) + (1 if has_epoch else 0)
    heights = []
    per_bits = {}
    for bits in bits_list:
        rs = [r for r in result["paillier"] if r["key_bits"] == bits and r["family"] != "phe"
              and r.get("vs_phe_cpu" if (r["workers"] or 1) == 1 else "vs_phe_wall")]
        per_bits[bits] = rs
        heights.append(max(2.0, 0.24 * len(rs) + 1.0))
    if has_epoch:
        heights.append(1.6)
    fig, axes = plt.subplots(panels, 1, figsize=(11, sum(heights) + 0.6),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, bits in zip(axes[:, 0], bits_list):
        rs = per_bits[bits]
        labels, values, colors = [], [], []
        for r in rs:
            one = (r["workers"] or 1) == 1
            labels.append(f"{r['op']} | {r['method']}" + ("" if one else " (wall)"))
            values.append(r["vs_phe_cpu"] if one else r["vs_phe_wall"])
            colors.append(_FAMILY_COLORS.get(r["family"], "tab:purple"))
        ax.barh(range(len(values)), values, color=colors)
        ax.set_yticks(range(len(values)), labels, fontsize=7)
        ax.axvline(1.0, color="black", lw=1)
        ax.set_xscale("log")
        ax.invert_yaxis()
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:.3g}x", va="center", fontsize=6)
        ax.set_title(f"Paillier-{bits}: rate relative to phe (per CPU-second; 2-worker rows per wall second; "
                     "log scale, > 1 faster)", fontsize=9)
        ax.legend(handles=[Patch(color=c, label=name) for name, c in (
            ("vflsec", _FAMILY_COLORS["vflsec"]), ("vflsec old path", _FAMILY_COLORS["vflsec-old"]),
            ("HEU", _FAMILY_COLORS["heu"]))], fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        if values:
            ax.set_xlim(right=max(values) * 3)  # room for the value labels
    if has_epoch:
        ax = axes[-1, 0]
        ep = result["epoch"]
        labels = list(ep["runs"])
        values = [ep["runs"][k]["cpu_s"] for k in labels]
        ax.barh(range(len(values)), values, color=["tab:green", "tab:olive"][:len(values)])
        ax.set_yticks(range(len(values)), labels, fontsize=8)
        ax.invert_yaxis()
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:.1f} s", va="center", fontsize=7)
        ax.set_xlabel("CPU seconds")
        ax.set_title(f"one HE-VFL epoch, Paillier-2048, n = {ep['n_samples']}, batch {ep['batch_size']}: "
                     f"{ep['cpu_ratio_old_over_new']:.3g}x less CPU", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


def render(result: Dict[str, Any], out: Path) -> List[str]:
    """Write ``report.md`` and ``he.png`` of ``result`` (a run's ``results.json``
    content) into ``out``; returns their names."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(render_report(result))
    plot(result, out / "he.png")
    return ["report.md", "he.png"]
