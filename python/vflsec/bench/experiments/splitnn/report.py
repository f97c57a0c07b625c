"""``vflsec bench splitnn``'s ``report.md`` and plots, from the results alone
(``--rerender`` rewrites them without measuring): the settings, Table 2 beside
the paper's numbers with the claims of ``papers/vfl_afe.toml``, Table 3 and
the replaceable parts timed alone, the DP-VFL table with the claim of
``papers/dp_vfl.toml``, FedPass, the rescale section, and the Conclusion
(:mod:`.conclusion`)."""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Callable, Dict, List

from ....splitnn.defenses.dp_sgd import DPSGD
from ...claims import verdict_table
from ...common import (
    NO_GUARANTEE,
    PREDATES_DP_LAYER,
    audit_legend,
    audit_mechanisms,
    dp_noise_label,
    epsilon_cell,
    markdown_table,
    warned_cell,
    warning_notes,
)
from ...dp_sgd_clip import clip_text, is_percentile_variant
from ...envelope import load_text
from .afe import DELTA
from .baseline import IMPLS
from .conclusion import conclusion, lattice_run
from .papers import PAPER_TABLE2, PAPER_TABLE3, TIMING_STEPS
from .plots import plot_dp_vfl, plot_table2, plot_table3, table2_summary
from .rescale import plot_rescale, report_rescale
from .verdicts import dp_vfl_verdicts, section_rows, table2_verdicts

__all__ = ["render", "report_markdown"]

AFE_MECHANISMS = ("vfl_afe_embedding", "vfl_afe_rescale")  # the audit column of Table 2's epsilon


def _audit_line(result: Dict[str, Any]) -> str:
    return audit_legend() if audit_mechanisms(result, AFE_MECHANISMS) else f"Audit: {PREDATES_DP_LAYER}."


def _claims(paper: str, verdicts: List[Any]) -> List[str]:
    return [f"Claims of `papers/{paper}.toml` against this run:", "", verdict_table(verdicts), ""]


def _report_table2(result: Dict[str, Any]) -> List[str]:
    cfg = result["config"]
    summary = table2_summary(result.get("accuracy", []))
    if not summary:
        return []
    lines = ["", "## Table 2: test accuracy (%)", ""]
    headers = ["dataset", "majority class", "centralized", "unprotected", "vanilla", "+R", "+D",
               "full (VFL-AFE)", "epsilon per release", "composed epsilon"]
    table = []
    for name, cells in summary.items():
        dp_rows = [r for r in section_rows(result, "table2") if r["dataset"] == name and r["epsilon_composed"]]
        table.append([name] + [100 * cells[k] if k in cells else None
                               for k in ("majority", "centralized", "unprotected", "vanilla", "R", "D", "full")]
                     + ([dp_rows[0]["epsilon"], epsilon_cell(dp_rows[0]["epsilon_composed"], claims_dp=True,
                                                             mechanisms=audit_mechanisms(result, AFE_MECHANISMS))]
                        if dp_rows else [None, None]))
        paper = PAPER_TABLE2.get(name)
        if paper:
            table.append([f"{name} (paper)", None, None, None, paper["vanilla"], paper["R"], paper["D"],
                          paper["full"], "not stated", None])
    return lines + [markdown_table(headers, table), "",
                    f"Composed epsilon: each sample's embedding is released once per epoch, so {cfg['epochs']} "
                    "Gaussian releases compose (the defense's accountant, vflsec.dp) at the same delta.",
                    "", _audit_line(result), ""] + _claims("vfl_afe", table2_verdicts(result))


def _report_table3(result: Dict[str, Any]) -> List[str]:
    timing = result.get("timing") or []
    lines: List[str] = []
    if timing:
        lines += ["## Table 3: time per training step", "",
                  f"Dataset {timing[0]['dataset']}, {timing[0]['n_samples']} samples, batch {timing[0]['batch_size']}. "
                  "seconds_per_step of a component = cumulative per-step time with it minus without it "
                  "(minimum over epochs); 'own' = the defense's own timer for that component.", ""]
        rows = []
        total_v = sum(r["seconds_per_step"] for r in timing if r["impl"] == "vflsec")
        for step in TIMING_STEPS:
            v = {impl: next(r for r in timing if r["impl"] == impl and r["step"] == step) for impl in IMPLS}
            kv, kb = v["vflsec"]["kernel_seconds_per_step"], v["baseline"]["kernel_seconds_per_step"]
            ms = lambda x: None if x is None else 1e3 * x  # noqa: E731
            rows.append([step, ms(v["vflsec"]["seconds_per_step"]), ms(v["baseline"]["seconds_per_step"]),
                         ms(v["vflsec"]["defense_seconds_per_step"]), ms(v["baseline"]["defense_seconds_per_step"]),
                         ms(kv), ms(kb), (kb / kv) if kv and kb else None,
                         100 * v["vflsec"]["seconds_per_step"] / total_v if total_v > 0 else None,
                         PAPER_TABLE3[step][1]])
        lines += [markdown_table(["step", "vflsec ms", "baseline ms", "vflsec own ms", "baseline own ms",
                                  "vflsec kernel ms", "baseline kernel ms", "kernel speed-up",
                                  "vflsec % of step", "paper % of step"], rows), "",
                  ("Kernel = the part vflsec replaces: pairwise-distance statistics (vs torch.cdist + torch "
                   "statistics), fuzzy c-means (vs numpy FCM); the noise release is the same lattice release in "
                   "both impls (torch.randn added in floating point is not a DP release), compared alone below. "
                   if lattice_run(result) else
                   "Kernel = the part vflsec replaces: noise draw (ChaCha20 CSPRNG vs torch.randn, which is not "
                   "cryptographically secure), pairwise-distance statistics (vs torch.cdist + torch statistics), "
                   "fuzzy c-means (vs numpy FCM). ")
                  + "Differences of totals can be negative under load; the own/kernel timers are the robust "
                  "figures.", ""]
    isolated = result.get("timing_isolated") or []
    if isolated:
        lines += ["### The replaceable parts timed alone", "",
                  f"One batch of {isolated[0]['batch_size']} x {isolated[0]['dim']}, best of 15 interleaved rounds "
                  "of 5 calls, outside the trainer (inside training the timers above also include waiting "
                  "for the GIL while the other party threads run).", ""]
        rows = []
        for step in ("noise", "rescale", "adjust"):
            v = {r["impl"]: r["seconds_per_call"] for r in isolated if r["step"] == step}
            noise = "noise (lattice release vs h + torch.randn)" if lattice_run(result) else "noise draw"
            rows.append([{"noise": noise, "rescale": "pairwise-distance stats",
                          "adjust": "fuzzy c-means"}[step], 1e3 * v["vflsec"], 1e3 * v["baseline"],
                         v["baseline"] / v["vflsec"]])
        lines += [markdown_table(["part", "vflsec ms", "baseline ms", "speed-up"], rows), ""]
    return lines


def _dp_sgd_epsilon(result: Dict[str, Any], r: Dict[str, Any]) -> Any:
    """A DP-VFL row's epsilon cell: with the percentile clip there is no guarantee,
    also in runs from before that was reported (their number is shown as theirs);
    a row whose training raised a PrivacyWarning (e.g. delta >= 1/n) is labelled."""
    eps = r["epsilon_composed"]
    if is_percentile_variant(r.get("variant")) and eps is not None:
        return f"{NO_GUARANTEE} (the run reported {eps:.4g}; its clip reads the gradients)"
    cell = epsilon_cell(eps, claims_dp=r["defense"] == "dp_sgd", mechanisms=audit_mechanisms(result, ("dp_sgd",)))
    return warned_cell(cell, r.get("privacy_warning"))


# DPSGD's calibration_steps, which the DP-VFL section leaves at its default: the percentile rule's window.
_PERCENTILE_STEPS = int(inspect.signature(DPSGD).parameters["calibration_steps"].default)


def _clip_sentence(d: Dict[str, Any]) -> str:
    """What the run's clip was: the grid's ``clips`` (runs from before that key used the paper's 80th percentile)."""
    clips = d.get("clips")
    if clips is None:
        return (f"Clip threshold: {clip_text('p80', _PERCENTILE_STEPS)}; runs from before the grid key clips had "
                "only this clip.")
    head = "Clip threshold" if len(clips) == 1 else "Clip thresholds (each DP-SGD cell once per clip)"
    text = f"{head}: " + "; ".join(clip_text(c, _PERCENTILE_STEPS) for c in clips) + "."
    if any(not isinstance(c, str) for c in clips):
        text += (" With a clip fixed before the run the composed epsilon is the whole run's (PLD, replace-one "
                 "neighbours, Poisson-sampling assumption as Opacus) and meets the target by construction.")
    return text


def _report_dp_vfl(result: Dict[str, Any]) -> List[str]:
    d = result["config"]["dp_vfl"]
    found = section_rows(result, "dp_vfl")
    deltas = sorted({r["delta"] for r in found if r["defense"] == "dp_sgd" and r.get("delta") is not None})
    lines = ["## DP-VFL (Ranbaduge & Ding): DP-SGD on every data owner's bottom model", "",
             "Split MLP of the paper (bottom p -> 48 -> 32, head 32 x owners -> 196 -> out), "
             + (f"delta = {', '.join(f'{x:g}' for x in deltas)} (the paper's), " if deltas else "")
             + f"SGD lr {d['lr']}, batch {d['batch_size']}, {d['epochs']} epochs (the paper: lr 2e-4, 100 epochs; "
             f"reduced to fit 2 CPU cores), at most {d['max_rows']} rows per dataset. {_clip_sentence(d)}", ""]
    rows = []
    for r in found:
        model = {"centralized": "centralized", "none": "non-private VFL"}.get(r["defense"], r["defense"])
        clip = r.get("variant") if r["defense"] == "dp_sgd" else None
        if r.get("diverged"):  # a result: the cell's training diverged (dp.DIVERGED_MSE_FACTOR, non-finite values)
            eps_cell = (_dp_sgd_epsilon(result, r) if r.get("epsilon_composed") is not None
                        else "n/a (training stopped)")
            rows.append([r["dataset"], model, r["parties"], clip, r["epsilon"], eps_cell, r["metric"],
                         f"**diverged**: {r['diverged']}"])
            continue
        rows.append([r["dataset"], model, r["parties"], clip, r["epsilon"], _dp_sgd_epsilon(result, r), r["metric"],
                     r["value"]])
    lines += [markdown_table(["dataset", "model", "owners", "clip", "epsilon", "composed epsilon", "metric", "value"],
                             rows), ""]
    lines += warning_notes(found) + [_audit_line(result), ""]
    return lines + _claims("dp_vfl", dp_vfl_verdicts(result))


def _report_fedpass(result: Dict[str, Any]) -> List[str]:
    f = result["config"]["fedpass"]
    lines = ["## FedPass: accuracy against passport settings", "",
             f"{', '.join(sorted({r['dataset'] for r in section_rows(result, 'fedpass')}))}, 2 parties "
             "(passport in the passive bottom's last layer and the head's first), SGD lr 1e-2, "
             f"batch 64, {f['epochs']} epochs, at most {f['max_rows']} rows. The attack side of FedPass is in "
             "`vflsec bench privacy`.", ""]
    rows = [[r["variant"] or "unprotected", r["value"]] for r in section_rows(result, "fedpass")]
    lines += [markdown_table(["passport (N, sigma^2)", "test accuracy"], rows), ""]
    return lines


# The sections after Table 2 / 3, in the report's order (each shown when it has rows).
SECTION_REPORTS: Dict[str, Callable[[Dict[str, Any]], List[str]]] = {
    "dp_vfl": _report_dp_vfl, "fedpass": _report_fedpass, "rescale": report_rescale}


def report_markdown(result: Dict[str, Any]) -> str:
    """``report.md`` of ``result``."""
    cfg = result["config"]
    lines = ["# vflsec bench splitnn: VFL-AFE", "",
             f"Machine: {result['machine']['cpu']}, {result['machine']['logical_cores']} logical cores; "
             f"device {cfg['device']}. Mode: {'quick' if cfg['quick'] else 'full'}.", ""]
    load = load_text(result)
    if load != "load average not recorded":  # results from before the runner's envelope have none
        lines += [f"Machine load (Table 3's timings slow down under it): {load}.", ""]
    lines += [f"Settings: epochs {cfg['epochs']}, batch {cfg['batch_size']}, Adam lr {cfg['lr']}, t = {cfg['t']}, "
              f"epsilon = {cfg['epsilon']} per release ({cfg['calibration']} calibration"
              f"{', as the paper' if cfg['calibration'] == 'classic' else ''}), "
              f"delta = {DELTA}, alpha (KL) = {cfg['kl_weight']}, beta (contrastive) = {cfg['contrastive_weight']}, "
              f"FCM confidence threshold {cfg['confidence_threshold']}, seeds {cfg['seeds']}. "
              "The paper states neither epsilon nor alpha/beta/c; these are vflsec's choices.", "",
              dp_noise_label(cfg.get("noise_seed")) + ".", ""]
    if result.get("partial"):
        lines += ["**Partial run** (interrupted or failed): only the finished sections are shown.", ""]
    for name, src in cfg.get("sources", {}).items():
        lines.append(f"- {name}: {src}")
    lines += _report_table2(result) + _report_table3(result)
    for key, report_fn in SECTION_REPORTS.items():
        if section_rows(result, key):
            lines += report_fn(result)
    lines += conclusion(result)
    return "\n".join(lines) + "\n"


def render(result: Dict[str, Any], out: Path) -> List[str]:
    """Write ``report.md`` and the plots of ``result`` to ``out`` (and print the
    report); returns the names of the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = report_markdown(result)
    (out / "report.md").write_text(report)
    written = ["report.md"]
    cfg = result["config"]
    table2 = table2_summary(result.get("accuracy", []))
    if table2 and plot_table2(table2, out / "table2_accuracy.png", cfg["seeds"]):
        written.append("table2_accuracy.png")
    if result.get("timing"):
        plot_table3(result["timing"], out / "table3_timing.png",
                    cfg.get("timing_rounds", 1) * cfg.get("timing_epochs", 1))
        written.append("table3_timing.png")
    dp_vfl = section_rows(result, "dp_vfl")
    if dp_vfl and plot_dp_vfl(dp_vfl, out / "dp_vfl.png"):
        written.append("dp_vfl.png")
    if section_rows(result, "rescale"):
        plot_rescale(result, out / "rescale.png")
        written.append("rescale.png")
    print(report)
    return written
