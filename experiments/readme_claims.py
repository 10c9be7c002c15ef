"""The README's quickstart figures, written from the quickstart's committed records.

    pgjax sweep experiments/sweeps/quickstart.toml --set out=experiments/results --plot
    python experiments/readme_claims.py            # rewrites the README's quickstart block
    python experiments/readme_claims.py --check    # exit 1 if the README differs from it

Everything between the README's ``<!-- quickstart-claims -->`` markers (the tables and the
sentences that cite figures) is computed here from ``experiments/results/quickstart``
through ``pgjax.results`` (the trust-region table, final returns, reference-normalised
aggregates and probabilities of improvement with fixed bootstrap seeds), so a rerun that
differs shows up as a diff and no figure is typed by hand.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
RECORDS = REPO / "experiments" / "results" / "quickstart"
README = REPO / "README.md"
BEGIN, END = "<!-- quickstart-claims:begin -->", "<!-- quickstart-claims:end -->"
ORDER = ["ppo", "spo", "fixpo", "trpo"]
NAMES = {"ppo": "PPO", "spo": "SPO", "fixpo": "FixPO", "trpo": "TRPO"}
REPS = 2000


def _g(v: float, digits: int = 2) -> str:
    return f"{v:.{digits}g}" if abs(v) < 10 else f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}"


def tables(root: Path = RECORDS):
    """(trust-region table, aggregate, improvement, finals) of the quickstart's records."""
    from pgjax import results
    from pgjax.plotting import aggregate_tables, load, trust_region_table

    df = load([root])
    agg, prob = aggregate_tables(df, REPS, seed=0)
    return trust_region_table(df), agg, prob, results.finals(df)


def render(root: Path = RECORDS) -> str:
    tr, agg, prob, final = tables(root)
    tr, agg = tr.set_index("group"), agg.set_index("group")
    rules = [g for g in ORDER if g in tr.index]
    lines = ["| rule | max \\|r − 1\\| per update: median / largest | max per-state KL: "
             "median / largest | seeds reaching "
             f"{_g(tr['target_return'].iloc[0], 3)} | median steps to it |",
             "|---|---|---|---|---|"]
    for g in rules:
        t = tr.loc[g]
        bound = " (bound ε_KL = 0.5)" if g == "fixpo" else ""
        lines.append(f"| {NAMES[g]} | {_g(t['ratio_dev_max_median'])} / "
                     f"{_g(t['ratio_dev_max_largest'], 3)} | {_g(t['kl_max_median'])} / "
                     f"{_g(t['kl_max_largest'], 3)}{bound} | {t['runs_reaching_target']} | "
                     f"{t['median_steps_to_target']:,.0f} |")
    lines += ["", "| rule | final return per seed | normalised score: IQM [95% CI] | runs "
              "finished / unfinished / failed |", "|---|---|---|---|"]
    for g in rules:
        a = agg.loc[g]
        seeds = ", ".join(f"{v:,.1f}" for v in final.loc[final["group"] == g, "final"])
        lines.append(f"| {NAMES[g]} | {seeds} | {a['iqm']:.3f} [{a['iqm_ci95_lo']:.3f}, "
                     f"{a['iqm_ci95_hi']:.3f}] | {a['finished']} / {a['unfinished']} / "
                     f"{a['failed']} |")
    spo, ppo, fixpo, trpo = (tr.loc[g] for g in ("spo", "ppo", "fixpo", "trpo"))
    kl_ratio = sorted([ppo["kl_max_median"] / spo["kl_max_median"],
                       ppo["kl_max_largest"] / spo["kl_max_largest"]])
    closer = spo["ratio_dev_max_largest"] < ppo["ratio_dev_max_largest"]
    bound_held = fixpo["kl_max_largest"] <= 0.5 * (1 + 1e-6)
    at_max = int((final["final"] >= 1000.0).sum())
    below = final[final["final"] < 1000.0]
    others = "; ".join(f"{NAMES.get(x.group, x.group)} seed {x.seed} at {x.final:,.1f} (score "
                       f"{x.score:.2f})" for x in below.itertuples())
    p = prob["probability_of_improvement"]
    lines += [
        "",
        f"- SPO's ratios {'stayed closer to 1 than' if closer else 'did not stay closer to 1 than'}"
        f" PPO's (largest |r − 1| {_g(spo['ratio_dev_max_largest'], 3)} against "
        f"{_g(ppo['ratio_dev_max_largest'], 3)}; max per-state KL "
        f"{kl_ratio[0]:.1f}–{kl_ratio[1]:.1f}× smaller): its objective peaks at |r − 1| = ε "
        f"and pulls any ratio beyond it back, where PPO's clipping only stops the gradient.",
        f"- FixPO's max per-state KL {'never exceeded' if bound_held else 'EXCEEDED'} ε_KL = "
        f"0.5 at any update (largest {_g(fixpo['kl_max_largest'], 3)}): the guarantee. It "
        f"bounds the KL, not the ratio: single ratios reached "
        f"{_g(fixpo['ratio_dev_max_largest'], 3)} from 1.",
        f"- TRPO bounds the *mean* KL (δ = 0.01), not the per-state maximum, which reached "
        f"{_g(trpo['kl_max_largest'], 3)}.",
        f"- {at_max} of {len(final)} runs end at the task's maximum (1,000)"
        f"{'; ' + others if others else ''}. Scores are normalised by the task's fixed "
        f"references (random policy {_reference()[0]:g}, maximum 1,000), so a seed below the "
        f"maximum keeps its score rather than becoming 0. The probabilities of improvement "
        f"between the rules lie in [{p.min():.2f}, {p.max():.2f}]; "
        + ("every 95% interval covers 0.5: no rule is ranked above another on returns at "
           "this budget." if _covers(prob) else "not every 95% interval covers 0.5: see "
           "improvement.csv."),
    ]
    return "\n".join(lines)


def _reference():
    from pgjax.references import REFERENCES

    ref = REFERENCES["brax:inverted_pendulum"]
    return ref.random, ref.maximum


def _covers(prob: pd.DataFrame) -> bool:
    return bool(((prob["ci95_lo"] <= 0.5) & (prob["ci95_hi"] >= 0.5)).all())


def readme_block(text: str) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true",
                   help="compare the README with the records instead of writing it")
    a = p.parse_args()
    text = README.read_text()
    block = render()
    if a.check:
        if readme_block(text) != block:
            print("README.md's quickstart figures differ from experiments/results/quickstart; "
                  "run python experiments/readme_claims.py", file=sys.stderr)
            sys.exit(1)
        print("README.md matches the quickstart records")
        return
    head, rest = text.split(BEGIN, 1)
    README.write_text(head + BEGIN + "\n" + block + "\n" + END + rest.split(END, 1)[1])
    print(block)


if __name__ == "__main__":
    main()
