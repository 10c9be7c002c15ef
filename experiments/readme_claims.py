"""The figures of README.md and the documentation pages that come from committed records,
written from those records.

    python experiments/readme_claims.py            # rewrites every block
    python experiments/readme_claims.py --check    # exit 1 if a page differs from them

Each block lies between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` in the document
``HOMES`` names and is computed here through ``pgjax.analysis.results``, so a rerun that differs
shows up as a diff and no figure is typed by hand:

- ``headline`` (README.md) and ``results-headline`` (docs/results/index.md): one row per
  headline result (the quickstart, the four papers' claims, the MuJoCo-v5 table, the DM
  Control table), each linking to its page;
- ``quickstart-claims`` (docs/getting-started/first-sweep.md): the quickstart's tables and
  the sentences that cite figures, from ``experiments/results/quickstart`` (``pgjax sweep
  experiments/sweeps/quickstart.toml --set out=experiments/results --plot``): the
  trust-region table, final returns, reference-normalised aggregates and probabilities of
  improvement with fixed bootstrap seeds;
- ``mujoco-table`` (docs/results/mujoco-v5.md): the Gymnasium MuJoCo-v5 table
  (``experiments/mujoco_table.py``), with the Ant-v4 runs and Ant-v5 without its contact
  forces beside it;
- ``dmc-table`` (docs/results/dmc.md): the DM Control table (``experiments/dmc_table.py``);
- ``tianshou-settings`` (experiments/README.md, experiment 14g): the MuJoCo-v5 table at
  Tianshou's own settings and its comparison with the preset's table, task by task;
- ``preset-changes`` (experiments/README.md, experiment 14g): the two pendulums under the
  four combinations of the preset's two changes;
- ``ant-observation`` (experiments/README.md, experiment 14h): Ant-v5 with and without its
  contact forces in the observation (and their cost), beside Ant-v4;
- ``jaxmarl-table`` (docs/results/jaxmarl.md, experiment 16): HAPPO, MAPPO and IPPO on SMAX
  and MPE (``experiments/jaxmarl_table.py``);
- ``s2pg-protocol-finals``, ``happo-protocol-finals``, ``fixpo-paper-finals`` and
  ``happo-paper-finals`` (experiments/README.md, experiments 12c, 12d, 10b and 10d): final
  returns per seed and verdicts of S2PG, HAPPO and FixPO against their baselines;
- ``playground-vs-brax`` and ``playground-trace`` (benchmarks/README.md): Brax's trainer
  against pgjax on Playground's DM Control tasks (``benchmarks/vs_brax.py --playground``),
  and the runs that trace where Brax's ends higher (``benchmarks/report_vs_brax.py``).
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
RECORDS = REPO / "experiments" / "results" / "quickstart"
SWEEPS = REPO / "experiments" / "results" / "sweeps"
README = REPO / "README.md"
EXPERIMENTS_README = REPO / "experiments" / "README.md"
BENCHMARKS_README = REPO / "benchmarks" / "README.md"
PLAYGROUND_VS_BRAX = REPO / "benchmarks" / "results" / "playground_vs_brax.json"
PLAYGROUND_TRACE = REPO / "benchmarks" / "results" / "playground_trace"
DOCS = REPO / "docs"
ORDER = ["ppo", "spo", "fixpo", "trpo"]
NAMES = {"ppo": "PPO", "spo": "SPO", "fixpo": "FixPO", "trpo": "TRPO"}
REPS = 2000


def _g(v: float, digits: int = 2) -> str:
    return f"{v:.{digits}g}" if abs(v) < 10 else f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}"


@functools.lru_cache(maxsize=None)
def tables(root: Path = RECORDS):
    """(trust-region table, aggregate, improvement, finals) of the quickstart's records."""
    from pgjax.analysis import results
    from pgjax.tools.plotting import aggregate_tables, load, trust_region_table

    df = load([root])
    agg, prob = aggregate_tables(df, REPS, seed=0)
    return trust_region_table(df), agg, prob, results.finals(df)


def render(root: Path = RECORDS) -> str:
    from pgjax.analysis import results

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
        lines.append(f"| {NAMES[g]} | {seeds} | {results.spread_cell(a)} | {a['finished']} / "
                     f"{a['unfinished']} / {a['failed']} |")
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
    from pgjax.analysis.references import REFERENCES

    ref = REFERENCES["brax:inverted_pendulum"]
    return ref.random, ref.maximum


def _covers(prob: pd.DataFrame) -> bool:
    return bool(((prob["ci95_lo"] <= 0.5) & (prob["ci95_hi"] >= 0.5)).all())


def _experiment(name: str, folder: str = "experiments"):
    """A sibling script of this one (``experiments/<name>.py``), or a script of another
    ``folder`` of the repository, as a module."""
    spec = importlib.util.spec_from_file_location(name, REPO / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _runs(mt, *dirs: Path):
    """``mujoco_table.load``'s frame of the run directories ``dirs`` (one configuration per
    task, or a one-line refusal naming them)."""
    return mt.load(list(dirs), "runs under " + ", ".join(str(d.relative_to(REPO))
                                                       for d in dirs), "readme_claims.py")


@functools.lru_cache(maxsize=None)
def _mujoco_tables():
    """(mujoco_table, the table's rows, the rows beside it)."""
    mt = _experiment("mujoco_table")
    t = mt.table(_runs(mt, SWEEPS / "mujoco_v5", SWEEPS / "mujoco_v5_seeds_5_9"))
    beside = mt.table(_runs(mt, SWEEPS / "mujoco_ant_v4", SWEEPS / "ant_v5_as_v4"),
                      beside=True)
    return mt, t, beside


def mujoco_table() -> str:
    mt, t, beside = _mujoco_tables()
    return mt.markdown(mt.ordered(pd.concat([t, beside], ignore_index=True))).strip("\n")


@functools.lru_cache(maxsize=None)
def _dmc_tables():
    """(dmc_table, (per task and rule, aggregate, probabilities of improvement))."""
    from pgjax.analysis import results

    dt = _experiment("dmc_table")
    return dt, dt.table(results.load([SWEEPS / "playground_dmc"], command="readme_claims.py"))


def dmc_table() -> str:
    dt, (t, agg, prob) = _dmc_tables()
    return dt.markdown(t, agg, prob).strip("\n")


def tianshou_settings() -> str:
    mt = _experiment("mujoco_table")
    ev = _runs(mt, SWEEPS / "tianshou_settings")
    preset = _runs(mt, SWEEPS / "mujoco_v5", SWEEPS / "mujoco_v5_seeds_5_9")
    return (mt.markdown(mt.ordered(mt.table(ev))).strip("\n")
            + "\n\nAgainst the table (the preset), task by task (\"these\": Tianshou's "
              "settings):\n\n" + mt.against_markdown(mt.against(ev, preset)).strip("\n"))


def _pendulum_runs(task: str) -> dict:
    """{setting: the run directories of ``task`` (``InvertedPendulum``, ...)} for the four
    combinations of the ``mujoco`` preset's two changes (experiment 14g), seeds 0-9 each."""
    group = f"ppo_gym-{task}-v5"
    changes = SWEEPS / {"InvertedDoublePendulum": "idp_preset_changes",
                        "InvertedPendulum": "ip_preset_changes"}[task]
    return {"both (the preset, the table's 10 seeds)": [SWEEPS / "mujoco_v5" / group,
                                                        SWEEPS / "mujoco_v5_seeds_5_9" / group],
            "advantages normalised only": [changes / f"{group}_norm_adv=True_target_kl=0"],
            "KL stop only": [changes / f"{group}_norm_adv=False_target_kl=0.1"],
            "neither (Tianshou's settings)": [SWEEPS / "tianshou_settings" / group]}


def preset_changes() -> str:
    """InvertedDoublePendulum under each setting: final [CI], seeds below 5,000, the ratio
    to and P against Tianshou's own final, the difference from neither change; then
    InvertedPendulum: final [CI], seeds that ended below 1,000, the lowest evaluation of
    any seed after 250k steps."""
    from pgjax.analysis import results
    from pgjax.analysis.results import bootstrap_ci

    mt = _experiment("mujoco_table")
    n = mt._num
    idp = {k: _runs(mt, *d) for k, d in _pendulum_runs("InvertedDoublePendulum").items()}
    source = results.eval_source(pd.concat(list(idp.values()), ignore_index=True))
    theirs = results.finals(mt.tianshou_runs(source), source)
    tf = theirs.loc[theirs["env"].map(mt.task_of) == "InvertedDoublePendulum",
                    "final"].to_numpy(float)
    finals = {k: results.finals(ev, source)["final"].to_numpy(float) for k, ev in idp.items()}
    *changed, base = finals  # the last setting is neither change
    lines = ["| InvertedDoublePendulum-v5 | final [95% CI] | seeds below 5,000 | / Tianshou's "
             "final | P(pgjax > Tianshou) [95% CI] | difference from neither [95% CI] |",
             "|---|---|---:|---:|---|---|"]
    for name, f in finals.items():
        lo, hi = bootstrap_ci(f)
        vs = mt.compare(f, tf)
        d = mt.compare(f, finals[base]) if name in changed else None
        diff = "0" if d is None else \
            f"{n(d['difference'])} [{n(d['difference_lo'])}, {n(d['difference_hi'])}]"
        lines.append(f"| {name} | {n(f.mean())} [{n(lo)}, {n(hi)}] | "
                     f"{int((f < 5000).sum())} of {len(f)} "
                     f"| {f.mean() / tf.mean():.2f} | {vs['p_improvement']:.2f} "
                     f"[{vs['p_lo']:.2f}, {vs['p_hi']:.2f}] | {diff} |")
    lines += ["", "| InvertedPendulum-v5 | final [95% CI] | seeds that ended below 1,000 | "
              "lowest evaluation after 250k |", "|---|---|---:|---:|"]
    for name, dirs in _pendulum_runs("InvertedPendulum").items():
        ev = _runs(mt, *dirs)
        f = results.finals(ev, source)["final"].to_numpy(float)
        lo, hi = bootstrap_ci(f)
        late = ev.loc[ev["env_steps"] > 250_000, source].min()
        lines.append(f"| {name} | {n(f.mean())} [{n(lo)}, {n(hi)}] | "
                     f"{int((f < 1000).sum())} of {len(f)} | {n(late)} |")
    return "\n".join(lines)


def ant_observation() -> str:
    """Ant under the preset, seeds 0-4: as registered, without the contact forces in the
    observation (and their cost), and Ant-v4: final [CI], per seed, / Tianshou's final; then
    each --gym.kwargs variant against Ant-v5 as registered on the same seeds."""
    from pgjax.analysis import results
    from pgjax.analysis.results import bootstrap_ci

    mt = _experiment("mujoco_table")
    n = mt._num
    default = _runs(mt, SWEEPS / "mujoco_v5")
    variants = {"Ant-v5 as registered (the table's seeds 0-4)":
                default[default["env"] == "gym:Ant-v5"]}
    for (env, kw), g in mt.tasks(_runs(mt, SWEEPS / "ant_v5_as_v4")):
        variants[f"Ant-v5, `{kw}`"] = g
    variants["Ant-v4 (experiment 14c)"] = _runs(mt, SWEEPS / "mujoco_ant_v4")
    source = results.eval_source(default)
    theirs = results.finals(mt.tianshou_runs(source), source)
    tf = theirs.loc[theirs["env"].map(mt.task_of) == "Ant", "final"].to_numpy(float)
    finals = {k: results.finals(ev, source)["final"].to_numpy(float)
              for k, ev in variants.items()}
    base = finals[next(iter(finals))]
    lines = ["| Ant, seeds 0-4, `--preset mujoco` | final [95% CI] | per seed | "
             "/ Tianshou's final | difference from Ant-v5 as registered [95% CI] | P(these > "
             "those) |", "|---|---|---|---:|---|---:|"]
    for i, (name, f) in enumerate(finals.items()):
        lo, hi = bootstrap_ci(f)
        d = mt.compare(f, base)
        vs = "" if i == 0 else (f"{n(d['difference'])} [{n(d['difference_lo'])}, "
                                f"{n(d['difference_hi'])}] | {d['p_improvement']:.2f}")
        lines.append(f"| {name} | {n(f.mean())} [{n(lo)}, {n(hi)}] | "
                     f"{', '.join(n(x) for x in f)} | {f.mean() / tf.mean():.2f} | "
                     f"{vs or '— | —'} |")
    return "\n".join(lines)


# The papers' claims rerun at their protocols (experiments/README.md, experiment 12): what
# was run, its sweep folders, the groups shown and their names (keyed by group: the sweeps'
# labels), the pair whose P(X > Y) is given, and the
# comparisons a verdict is given for: (method, baseline, equivalence margin as a fraction of
# the baseline's mean final return, where the paper claims equal returns, else None)
# experiment 12c's sweeps: S2PG, memoryless PPO and BPTT (seeds 0-2, then 3 and 4 apart)
S2PG_PROTOCOL_DIRS = ("protocol_s2pg_stateful", "protocol_s2pg_memoryless", "protocol_s2pg_bptt",
                      "protocol_s2pg_bptt_seed3", "protocol_s2pg_bptt_seed4")
CLAIMS = [
    {"what": "SPO against PPO (Xie et al., ICML 2025), Gymnasium Hopper-v5, the paper's "
             "7-layer policy (`--preset spo-paper`)",
     "dirs": ("protocol_spo_hopper",), "names": {"spo": "SPO", "ppo": "PPO"},
     "pair": ("spo", "ppo"), "verdicts": (("spo", "ppo", None),)},
    {"what": "FixPO against its authors' PPO baseline (Zentner et al. 2023), Hopper-v5 "
             "(`fixpo-paper`, `fixpo-paper-ppo`)",
     "dirs": ("protocol_fixpo", "protocol_fixpo_ppo"), "names": {"fixpo": "FixPO", "ppo": "PPO"},
     "pair": ("fixpo", "ppo"), "kl": "fixpo", "verdicts": (("fixpo", "ppo", 0.1),)},
    {"what": "S2PG against memoryless PPO and BPTT (Al-Hafez et al., ICLR 2024), "
             "velocity-hidden Brax halfcheetah, each at its authors' settings",
     "dirs": S2PG_PROTOCOL_DIRS,
     "names": {"S2PG": "S2PG", "memoryless PPO": "memoryless PPO", "BPTT": "BPTT"},
     "verdicts": (("S2PG", "memoryless PPO", None), ("S2PG", "BPTT", None))},
    {"what": "HAPPO against MAPPO with one shared actor (HARL's baseline) and with separate "
             "actors (Kuba et al., ICLR 2022), `mabrax:halfcheetah_2x3`",
     "dirs": ("protocol_happo", "protocol_happo_seeds_3_4", "protocol_happo_mappo_shared",
              "protocol_happo_mappo_shared_seeds_3_4"),
     "names": {"happo (separate actors)": "HAPPO",
               "mappo (shared actor)": "MAPPO (shared actor)",
               "mappo (separate actors)": "MAPPO (separate actors)"},
     "pair": ("happo (separate actors)", "mappo (shared actor)"),
     "verdicts": (("happo (separate actors)", "mappo (shared actor)", None),
                  ("happo (separate actors)", "mappo (separate actors)", None))},
]


def _budget(final: pd.DataFrame, names: dict) -> str:
    """"5 seeds, 4.0M steps" of a claim's finals (per group where the seeds differ)."""
    seeds = final.groupby("group").size()
    steps = int(final["env_steps"].max())
    size = f"{steps / 1e6:.1f}M" if steps >= 1_000_000 else f"{steps:,}"
    common = int(seeds.mode().iloc[0])
    other = ", ".join(f"{names[g]} {n}" for g, n in seeds.items() if n != common)
    return f"{common} seeds{f' ({other})' if other else ''}, {size} steps"


@functools.lru_cache(maxsize=None)
def _claim(i: int) -> tuple[str, str]:
    """(what was run, its figures) of ``CLAIMS[i]``: each group's final return, mean over
    seeds with its 95% CI from ``MIN_SEEDS`` seeds on (the interval of ``pgjax plot``'s
    aggregate.csv where that holds raw returns, a single task without references, and
    ``bootstrap_ci`` of the finals where it holds normalised scores: both percentile
    bootstraps over seeds), below that the seeds' range, labelled so; P(X > Y) of its pair;
    the verdict of each of its comparisons (``pgjax.analysis.verdicts``); and the largest max
    per-state KL where the claim is a bound."""
    from pgjax.analysis import results
    from pgjax.tools.plotting import load, trust_region_table
    from pgjax.analysis.results import MIN_SEEDS, VerdictError, bootstrap_ci, verdict

    c = CLAIMS[i]
    # a sweep of more seeds not run yet adds nothing (its groups show the seeds there are)
    dirs = [SWEEPS / d for d in c["dirs"] if (SWEEPS / d).exists()]
    ev = results.load(dirs, command="readme_claims.py")
    final = results.finals(ev)
    agg, prob = results.aggregate(final, REPS, seed=0)
    agg, prob = agg.set_index("group"), prob.set_index("comparison")
    names = {g: c["names"][g] for g in final["group"].unique()}
    order = sorted(names, key=lambda g: list(c["names"].values()).index(names[g]))
    cells, finals = [], {}
    for g in order:
        f = final.loc[final["group"] == g, "final"]
        finals[g] = f.to_numpy(float)
        a = agg.loc[g]
        if len(f) < MIN_SEEDS:  # no interval means anything: the seeds' range, said so
            cells.append(f"{names[g]} {f.mean():,.0f} [range {f.min():,.0f}, {f.max():,.0f}]")
            continue
        lo, hi = ((a["mean_ci95_lo"], a["mean_ci95_hi"])
                  if str(a["scores"]).startswith("unnormalised") else bootstrap_ci(f))
        cells.append(f"{names[g]} {f.mean():,.0f} [{lo:,.0f}, {hi:,.0f}]")
    text = ", ".join(cells)
    if "pair" in c:
        x, y = c["pair"]
        q = prob.loc[f"{x} > {y}"]
        text += f"; P({names[x]} > {names[y]}) = {results.improvement_cell(q)}"
    for method, baseline, margin in c.get("verdicts", ()):
        a, b = finals[method], finals[baseline]
        said = f"{names[method]} vs {names[baseline]}"
        try:
            v = verdict(a, b, margin * b.mean() if margin else None)
        except VerdictError:
            text += (f"; {said}: no verdict ({len(a)} and {len(b)} seeds, {MIN_SEEDS} per "
                     f"group needed)")
            continue
        margin_said = (f", equivalence margin ±{margin:.0%} of {names[baseline]}'s "
                       f"mean" if margin else "")
        text += f"; {said}: {_verdict_text(v)[:-1]}{margin_said})"
    if "kl" in c:
        tr = trust_region_table(load(dirs)).set_index("group")["kl_max_largest"]
        bound = c["kl"]
        text += (f"; largest max per-state KL: {names[bound]} {_g(tr[bound], 4)} (bound "
                 f"ε_KL = 0.5), " + ", ".join(f"{names[g]} {_g(tr[g], 3)}" for g in order
                                             if g != bound))
    policy = results.RETURN_LABELS[final["source"].iloc[0]].split("(")[-1].split()[0]
    return f"{c['what']}, {_budget(final, names)}", f"{policy} evaluation: {text}"


def _quickstart_row() -> tuple[str, str]:
    tr, _, _, final = tables()
    tr = tr.set_index("group")
    rules = [g for g in ORDER if g in tr.index]
    names = {g: NAMES[g] for g in rules}
    reach = {g: tr.loc[g, "runs_reaching_target"] for g in rules}
    target = _g(tr["target_return"].iloc[0], 3)
    reached = (f"all seeds of every rule reach {target}" if all(
        a == b for a, b in (r.split("/") for r in reach.values())) else
        f"seeds reaching {target}: " + ", ".join(f"{names[g]} {reach[g]}" for g in rules))
    kl = tr.loc["fixpo", "kl_max_largest"]
    return (f"{', '.join(names.values())} at their defaults on Brax inverted_pendulum (the "
            f"quickstart), {_budget(final, names)}",
            f"{reached}; FixPO's max per-state KL at most {_g(kl, 3)} at every update (bound "
            f"ε_KL = 0.5), TRPO's up to {_g(tr.loc['trpo', 'kl_max_largest'], 3)} (it bounds "
            f"the mean KL)")


def _mujoco_row() -> tuple[str, str]:
    mt, t, _ = _mujoco_tables()
    fin, best = t["final_over_tianshou_final"].dropna(), t["final_over_tianshou"].dropna()
    seeds, steps = int(t["seeds"].max()), int(t["env_steps"].max())
    return (f"PPO at one configuration (`--preset mujoco`) on the {len(t)} Gymnasium MuJoCo-v5 "
            f"tasks, {seeds} seeds, {steps / 1e6:.1f}M steps, against Tianshou's PPO",
            f"final ≥ 0.9 × Tianshou's final on {(fin >= 0.9).sum()} of {len(fin)} tasks "
            f"(≥ it on {(fin >= 1.0).sum()}); ≥ 0.9 × Tianshou's published figure (its best "
            f"during training) on {(best >= 0.9).sum()} of {len(best)}")


def _dmc_row() -> tuple[str, str]:
    from pgjax.analysis import results

    dt, (t, agg, _) = _dmc_tables()
    a = agg.set_index("group")
    rules = [r for r in dt.RULES if r in a.index]
    return (f"{', '.join(dt.name(r) for r in rules)} at `--preset playground-dmc` on "
            f"{t['task'].nunique()} DM Control Suite tasks (MuJoCo Playground), "
            f"{int(t['seeds'].max())} seeds, {int(t['env_steps'].max()):,} steps",
            "IQM of reference-normalised finals: " + ", ".join(
                f"{dt.name(r)} {results.spread_cell(a.loc[r])}" for r in rules))


# experiments 10b and 10d (experiments/README.md): each paper's rule at its authors' settings
# against its baselines: the sweep folders, the groups' names and the verdicts given
PAPER_SETTINGS = {
    "fixpo-paper-finals": {
        "dirs": ("fixpo_paper", "fixpo_paper_ppo"),
        "names": {"fixpo": "FixPO (`fixpo-paper`)", "ppo": "PPO (`cleanrl`)"},
        "verdicts": (("fixpo", "ppo"),)},
    "s2pg-protocol-finals": {
        "dirs": S2PG_PROTOCOL_DIRS,
        "names": {"S2PG": "S2PG", "BPTT": "BPTT-32", "memoryless PPO": "memoryless PPO"},
        "verdicts": (("S2PG", "memoryless PPO"), ("S2PG", "BPTT"))},
    # the same runs' deterministic evaluations (the mean z' and mean action)
    "s2pg-protocol-deterministic": {
        "dirs": S2PG_PROTOCOL_DIRS,
        "source": "eval_return",
        "names": {"S2PG": "S2PG", "BPTT": "BPTT-32", "memoryless PPO": "memoryless PPO"},
        "verdicts": (("S2PG", "memoryless PPO"), ("S2PG", "BPTT"))},
    "happo-protocol-finals": {
        "dirs": ("protocol_happo", "protocol_happo_seeds_3_4", "protocol_happo_mappo_shared",
                 "protocol_happo_mappo_shared_seeds_3_4"),
        "names": {"happo (separate actors)": "HAPPO",
                  "mappo (shared actor)": "MAPPO, shared actor (HARL's baseline)",
                  "mappo (separate actors)": "MAPPO, separate actors"},
        "verdicts": (("happo (separate actors)", "mappo (shared actor)"),
                     ("happo (separate actors)", "mappo (separate actors)"))},
    "happo-paper-finals": {
        "dirs": ("happo_paper", "happo_paper_shared"),
        "names": {"happo": "HAPPO (sequential, separate actors)",
                  "mappo (share_actor=False)": "MAPPO, separate actors",
                  "mappo (share_actor=True)": "MAPPO, one shared actor"},
        "verdicts": (("happo", "mappo (share_actor=False)"),
                     ("happo", "mappo (share_actor=True)"))},
}


def _verdict_text(v) -> str:
    """A verdict as the documents say it: its outcome, the difference and its 95% interval."""
    lo, hi = v.ci95
    return f"**{v.outcome}** (difference {v.difference:+,.0f} [{lo:+,.0f}, {hi:+,.0f}])"


def paper_settings(block: str) -> str:
    """A ``PAPER_SETTINGS`` table: per task and group the final return (mean over seeds with
    its 95% CI, or the seeds' range below ``MIN_SEEDS``) and each seed's, then the verdicts;
    the evaluation is the spec's ``source`` (``auto``: ``results.eval_source``)."""
    from pgjax.analysis import results
    from pgjax.analysis.results import MIN_SEEDS, VerdictError, ci_or_range, verdict

    spec = PAPER_SETTINGS[block]
    # a sweep of more seeds not run yet adds nothing (its groups show the seeds there are)
    final = results.finals(results.load([SWEEPS / d for d in spec["dirs"]
                                         if (SWEEPS / d).exists()], command="readme_claims.py"),
                           spec.get("source", "auto"))
    names = spec["names"]
    policy = results.RETURN_LABELS[final["source"].iloc[0]].split("(")[-1].split()[0]
    lines = [f"| task | group | final return ({policy} evaluation), mean [95% CI; below "
             f"{MIN_SEEDS} seeds the seeds' range] | n | per seed |",
             "|---|---|---|---:|---|"]
    said = []
    for env, rows in final.groupby("env", sort=True):
        by = {g: rows.loc[rows["group"] == g].sort_values("seed")["final"].to_numpy(float)
              for g in names if (rows["group"] == g).any()}
        for g, f in by.items():
            lo, hi = ci_or_range(f)
            spread = f"[{lo:,.0f}, {hi:,.0f}]" if len(f) >= MIN_SEEDS else \
                f"[range {lo:,.0f}, {hi:,.0f}]"
            lines.append(f"| {env.split(':', 1)[-1]} | {names[g]} | {f.mean():,.0f} {spread} | "
                         f"{len(f)} | {', '.join(f'{x:,.0f}' for x in f)} |")
        for a, b in spec["verdicts"]:
            try:
                text = _verdict_text(verdict(by[a], by[b]))
            except VerdictError as e:
                text = f"no verdict ({e})"
            said.append(f"- {env.split(':', 1)[-1]}, {names[a]} against {names[b]}: {text}.")
    return "\n".join(lines + [""] + said)


def jaxmarl_table() -> str:
    """Experiment 16's table (``experiments/jaxmarl_table.py``)."""
    return _experiment("jaxmarl_table").table()


def playground_vs_brax(trace: bool = False) -> str:
    """``benchmarks/report_vs_brax.py``'s table of Brax's trainer against pgjax on
    Playground's tasks (``vs_brax.py --playground``), or (``trace``) of the runs tracing its
    gaps."""
    import json

    report = _experiment("report_vs_brax", "benchmarks")
    res = json.loads(PLAYGROUND_VS_BRAX.read_text())
    if trace:
        return "\n".join(report.trace(res, PLAYGROUND_TRACE, PLAYGROUND_VS_BRAX.with_suffix("")))
    return "\n".join(report.playground(res))


def headline(folder: str = ".") -> str:
    """The headline results, a row each with a link to its page under ``docs/``, relative to
    ``folder``, the folder of the document that shows them (``.`` for README.md,
    ``docs/results`` for docs/results/index.md)."""
    def link(title: str, page: str) -> str:
        return f"[{title}]({Path(os.path.relpath(DOCS / page, REPO / folder)).as_posix()})"

    rows = [(*_quickstart_row(), link("A first sweep", "getting-started/first-sweep.md"))]
    rows += [(*_claim(i), link("The papers' claims", "results/claims.md"))
             for i in range(len(CLAIMS))]
    rows += [(*_mujoco_row(), link("Gymnasium MuJoCo-v5", "results/mujoco-v5.md")),
             (*_dmc_row(), link("DM Control Suite", "results/dmc.md")),
             (*_experiment("jaxmarl_table").summary(), link("JaxMARL", "results/jaxmarl.md"))]
    lines = ["| what was run | result (final return: mean over seeds [95% CI; a group of fewer "
             "than 5 seeds: their range]; verdicts: better, worse, not separated or "
             "equivalent, from Welch intervals of the difference) | details |",
             "|---|---|---|"]
    lines += [f"| {what} | {result} | {page} |" for what, result, page in rows]
    return "\n".join(lines)


def claims() -> str:
    """The papers' claims, one item each: what was run and its figures and verdicts
    (``_claim``)."""
    return "\n".join(f"- {what}: {result}." for what, result in map(_claim, range(len(CLAIMS))))


BLOCKS = {"headline": headline, "claims": claims,
          "results-headline": functools.partial(headline, folder="docs/results"),
          "quickstart-claims": render, "mujoco-table": mujoco_table, "dmc-table": dmc_table,
          "tianshou-settings": tianshou_settings, "preset-changes": preset_changes,
          "ant-observation": ant_observation, "jaxmarl-table": jaxmarl_table,
          "playground-vs-brax": playground_vs_brax,
          "playground-trace": functools.partial(playground_vs_brax, trace=True),
          **{name: functools.partial(paper_settings, name) for name in PAPER_SETTINGS}}
HOMES = {"headline": README, "results-headline": DOCS / "results" / "index.md",
         "claims": DOCS / "results" / "claims.md",
         "quickstart-claims": DOCS / "getting-started" / "first-sweep.md",
         "mujoco-table": DOCS / "results" / "mujoco-v5.md",
         "dmc-table": DOCS / "results" / "dmc.md",
         "tianshou-settings": EXPERIMENTS_README, "preset-changes": EXPERIMENTS_README,
         "ant-observation": EXPERIMENTS_README,
         "jaxmarl-table": DOCS / "results" / "jaxmarl.md",
         "playground-vs-brax": BENCHMARKS_README, "playground-trace": BENCHMARKS_README,
         **dict.fromkeys(PAPER_SETTINGS, EXPERIMENTS_README)}


def home(name: str) -> Path:
    """The document that holds block ``name``."""
    return HOMES[name]


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def readme_block(text: str, name: str = "quickstart-claims") -> str | None:
    """The block ``name`` of a document's text (None where it has none)."""
    begin, end = markers(name)
    if begin not in text or end not in text:
        return None
    if text.index(end) < text.index(begin):
        raise SystemExit(f"{home(name).relative_to(REPO)}'s {end} comes before its {begin}; "
                         f"put the block between them")
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true",
                   help="compare the pages with the records instead of writing them")
    p.add_argument("--block", action="append", choices=list(BLOCKS), dest="blocks",
                   help="only this block (repeatable; default: every block)")
    a = p.parse_args()
    read = {doc: doc.read_text() for doc in sorted(set(HOMES.values()))}
    texts = dict(read)
    names = a.blocks or list(BLOCKS)
    stale = []
    for name in names:
        doc = home(name)
        text, (begin, end) = texts[doc], markers(name)
        if readme_block(text, name) is None:
            raise SystemExit(f"{doc.relative_to(REPO)} has no {begin} ... {end} block; add "
                             f"the markers where the block belongs")
        block = BLOCKS[name]()
        if a.check:
            if readme_block(text, name) != block:
                stale.append(f"{doc.relative_to(REPO)}'s {name}")
            continue
        head, rest = text.split(begin, 1)
        texts[doc] = head + begin + "\n" + block + "\n" + end + rest.split(end, 1)[1]
        print(block, end="\n\n")
    if a.check:
        if stale:
            print(f"{', '.join(stale)} differ from the records; run python "
                  f"experiments/readme_claims.py", file=sys.stderr)
            sys.exit(1)
        print(f"the pages match the records ({', '.join(names)})")
        return
    for doc, text in texts.items():
        if text != read[doc]:
            doc.write_text(text)


if __name__ == "__main__":
    main()
