"""The Gymnasium MuJoCo-v5 table: PPO at one configuration (``--preset mujoco``) on nine
tasks against the published 1M-step figures.

    pgjax sweep experiments/sweeps/mujoco_v5.toml              # seeds 0-4
    pgjax sweep experiments/sweeps/mujoco_v5_seeds_5_9.toml    # seeds 5-9
    python experiments/mujoco_table.py experiments/results/sweeps/mujoco_v5 \
        experiments/results/sweeps/mujoco_v5_seeds_5_9 --out experiments/results/mujoco_v5

Runs are grouped by task as trained (the env id and its own options, ``--gym.kwargs``), so
several sweeps' directories of the same configuration pool; runs of several configurations
of one task (a grid, or directories whose options differ) are refused, naming the options
that differ: one row per task is one configuration's.

Per task, from the runs' stochastic evaluations (10 episodes each, as Tianshou's):

- ``final``: each seed's mean evaluation over the last 5% of its training
  (``pgjax.analysis.results.finals``), mean over seeds with a 95% bootstrap CI;
- ``best``: Tianshou's metric, the highest point of the seed-mean evaluation curve over
  training;
- the anchors with their sources, ``final / Tianshou``, and the wall time of the task's
  longest program (each program runs its seeds vmapped; the table's are 5 seeds each);
- decay: each seed's final against its best evaluation after ``--decay-after`` steps
  (``final >= best - 10% of |best|``); the seeds that fall below are counted (the CSV's
  ``decayed`` lists each; the markdown lists each decline), each marked
  ``peak`` when its final is still at or above the mean of its own evaluations after
  ``--decay-after`` (the best was a high point of a noisy or rising curve: a maximum over
  about 17 evaluations of 10 episodes each), ``noise`` when it is below that mean by less
  than two standard errors of the final, or ``decline`` when it is below by more. The
  final's standard error comes from its evaluations' episodes: sqrt(sum of s_i^2 / (n - 1))
  / k over its k evaluations, each of n episodes with standard deviation s_i (where the
  records hold no per-episode spread, a seed below its mean at all is a ``decline``).

``--beside DIR`` adds rows for runs of other task versions or options (e.g. ``Ant-v4``,
the task as Tianshou's v3 ran it in effect, or Ant-v5 without its contact forces),
labelled with their version and options and left out of the counts under the table.

``--against DIR`` compares the runs task by task with another configuration's runs of the
same tasks (e.g. the table's own, for a candidate change to the preset): the difference of
the mean finals with its 95% bootstrap CI (seeds resampled within each configuration) and
the probability of improvement P(these > those) with its CI (rliable), in
``against.csv`` and ``against.md``.

Writes ``table.csv``, ``table.md`` (the table of docs/results/mujoco-v5.md) and
``curves.png`` (the seed-mean curve with its bootstrap band per task, the Tianshou figure as
a line).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from pgjax.analysis import results
from pgjax.analysis.plots import save_png
from pgjax.analysis.results import bootstrap_ci

_TIANSHOU = "thu-ml/tianshou @ f240205: examples/mujoco/README.md:294-304"
_TIANSHOU_RUNS = ("thu-ml/tianshou @ 39acf20: examples/mujoco/benchmark/<task>/ppo/"
                  "test_rew_10seeds.csv (its per-seed curves, experiments/anchors/)")
# Tianshou's per-seed evaluation curves behind TIANSHOU (see the file's header)
ANCHOR = Path(__file__).resolve().parent / "anchors" / "tianshou_ppo_mujoco.csv"
_CLEANRL = "vwxyzjn/cleanrl @ 2d660b6: docs/rl-algorithms/ppo.md:339-344"

# Tianshou's PPO at 1M steps: the best seed-mean evaluation over training, 10 seeds, the
# v3 tasks (v2 for Reacher and the pendulums) under gym 0.17.3
TIANSHOU = {"Ant": 3258.4, "HalfCheetah": 5783.9, "Hopper": 2609.3, "Walker2d": 3588.5,
            "Swimmer": 66.7, "Humanoid": 787.1, "Reacher": -4.1, "InvertedPendulum": 1000.0,
            "InvertedDoublePendulum": 9231.3}
# cleanrl's ppo_continuous_action at 1M steps, the v4 tasks, 3 seeds (its own metric: the
# mean return of recent training episodes)
CLEANRL = {"HalfCheetah": 2905.85, "Walker2d": 2890.97, "Hopper": 2051.80,
           "InvertedPendulum": 950.98, "Humanoid": 742.19}

DECAY_TOLERANCE = 0.10  # a seed decays when its final falls more than 10% below its best
TASK_ORDER = ["InvertedPendulum", "InvertedDoublePendulum", "Reacher", "Swimmer", "Hopper",
              "Walker2d", "HalfCheetah", "Ant", "Humanoid"]


def task_of(env: str) -> str:
    """``gym:Hopper-v5`` -> ``Hopper``."""
    return env.split(":", 1)[-1].rsplit("-v", 1)[0]


def tianshou_runs(source: str, path: Path = ANCHOR) -> pd.DataFrame:
    """Tianshou's per-seed evaluation curves (``ANCHOR``) as a frame of the records' shape,
    one run per task and seed with its returns in the column ``source``, so that
    ``results.finals`` and this module read them as they read pgjax's runs."""
    d = pd.read_csv(path, comment="#")
    name = d["task"] + "-" + d["version"]
    return pd.DataFrame({
        "dir": "tianshou", "run": "tianshou/" + name + "/seed" + d["seed"].astype(str),
        "seed": d["seed"], "env": "tianshou:" + name, "algo": "ppo", "group": "tianshou",
        "status": "finished", "env_steps": d["env_steps"], "wall_time_s": np.nan,
        source: d["eval_return"]})


def ratio(value: float, anchor: float) -> float:
    """How far along from ``anchor``: value / anchor; for negative returns (Reacher) the
    ratio of magnitudes inverted, so that it is 1 at parity and below 1 when worse."""
    return value / anchor if anchor > 0 else anchor / value


def compare(a: np.ndarray, b: np.ndarray, reps: int = 2000, seed: int = 0) -> dict:
    """Two sets of seeds' finals: the difference of their means with its 95% bootstrap CI
    (each side's seeds resampled on their own) and P(a > b) with its CI (rliable)."""
    from rliable import library as rly

    a, b = np.asarray(a, float), np.asarray(b, float)
    rng = np.random.default_rng(seed)
    diffs = (a[rng.integers(0, len(a), (reps, len(a)))].mean(1)
             - b[rng.integers(0, len(b), (reps, len(b)))].mean(1))
    np.random.seed(seed)
    p, p_ci = rly.get_interval_estimates({"p": (a[:, None], b[:, None])},
                                         results.probability_of_improvement, reps=reps)
    return {"difference": a.mean() - b.mean(), "difference_lo": np.percentile(diffs, 2.5),
            "difference_hi": np.percentile(diffs, 97.5), "p_improvement": float(p["p"]),
            "p_lo": float(np.ravel(p_ci["p"])[0]), "p_hi": float(np.ravel(p_ci["p"])[1])}


def best_of_mean_curve(ev: pd.DataFrame, source: str) -> tuple[float, int]:
    """(the highest seed-mean evaluation, its env step) over the evaluation points every
    seed reached."""
    pts = results.return_points(ev, source, keys=["run"])
    curve = pts.groupby("point").agg(value=("value", "mean"), seeds=("value", "size"),
                                     env_steps=("env_steps", "max"))
    curve = curve[curve["seeds"] == pts["run"].nunique()]
    i = curve["value"].idxmax()
    return float(curve.loc[i, "value"]), int(curve.loc[i, "env_steps"])


class Decay(NamedTuple):
    """A seed whose final return is more than ``DECAY_TOLERANCE`` of its best below that best
    (best and mean over its evaluations after the decay threshold; ``se``: the final's
    standard error from its evaluations' episodes)."""

    seed: int
    final: float
    best: float
    mean: float
    se: float = np.nan

    @property
    def kind(self) -> str:
        """``peak`` (at or above its own mean: the best was a high point of a noisy or rising
        curve), ``noise`` (below its mean by less than two standard errors of the final) or
        ``decline`` (below by more, or below at all where the records give no standard
        error)."""
        if self.final >= self.mean:
            return "peak"
        return "noise" if self.mean - self.final < 2 * self.se else "decline"

    @property
    def declined(self) -> bool:
        return self.kind == "decline"

    def text(self, digits: int) -> str:
        below = ""
        if self.final < self.mean:
            below = (", no episode spread recorded" if np.isnan(self.se) else
                     f", {(self.mean - self.final) / self.se:.2f} SE below")
        return (f"seed {self.seed}: {_num(self.final, digits)} of best "
                f"{_num(self.best, digits)} ({self.kind}; its mean "
                f"{_num(self.mean, digits)}{below})")


def final_se(g: pd.DataFrame, source: str, window: float = results.FINAL_WINDOW) -> float:
    """Standard error of one run's final return (the mean of its evaluations over the last
    ``window`` of training) from the spread of each evaluation's n episodes:
    sqrt(sum s_i^2 / (n - 1)) / k over its k evaluations, s_i the episodes' standard
    deviation as recorded (``<source>_std``, over the n episodes, not corrected); NaN where
    the records hold no spread or episode count."""
    std, n = f"{source}_std", g["eval_envs"].iloc[0] if "eval_envs" in g else np.nan
    pts = g[g[source].notna()]
    tail = pts[pts["env_steps"] >= (1 - window) * pts["env_steps"].max()]
    if std not in g or pd.isna(n) or n < 2 or tail[std].isna().any():
        return np.nan
    return float(np.sqrt((tail[std] ** 2 / (float(n) - 1)).sum()) / len(tail))


def decayed_seeds(ev: pd.DataFrame, final: pd.DataFrame, source: str, after: int) -> list[Decay]:
    """Each seed whose final return is more than ``DECAY_TOLERANCE`` of its best evaluation
    after ``after`` steps below that best."""
    out = []
    for run, whole in ev.groupby("run"):
        g = whole[whole["env_steps"] >= after]
        if not g[source].notna().any():
            continue
        best = float(g[source].max())
        f = float(final.loc[final["run"] == run, "final"].iloc[0])
        if f < best - DECAY_TOLERANCE * abs(best):
            out.append(Decay(int(g["seed"].iloc[0]), f, best, float(g[source].mean()),
                             final_se(whole, source)))
    return out


def _task_options(ev: pd.DataFrame) -> pd.Series:
    return ev["gym.kwargs"].fillna("") if "gym.kwargs" in ev else pd.Series("", index=ev.index)


def tasks(ev: pd.DataFrame):
    """``ev`` grouped by the task as trained: ((env id, the task's own options, e.g. Ant-v5
    without its contact forces; "" for none), runs)."""
    return ev.groupby([ev["env"], _task_options(ev).rename("task_options")])


def one_configuration(ev: pd.DataFrame, what: str) -> None:
    """Exit with a one-line error (code 2) when a task's runs in ``ev`` (``results.load``'s
    frame: a column per recorded option, a grid point's own value in its runs) differ in
    their rule or in any option: one row per task is one configuration's. An option one
    directory's record lacks counts as differing (nan)."""
    runs = results.run_table(ev)
    recorded = {k for o in runs.attrs["options"].values() for k in o} | \
        {k for h in runs["hparams"] for k in h}
    options = ["algo"] + sorted(c for c in ev.columns if c in recorded)
    for (env, kw), g in tasks(ev):
        differ = [c for c in options if g[c].astype(str).nunique() > 1]
        if differ:
            values = "; ".join(f"{c} = {', '.join(sorted(g[c].astype(str).unique()))}"
                               for c in differ)
            task = env + (f" ({kw})" if kw else "")
            print(f"mujoco_table.py: the {what} of {task} differ in {values}; pass the "
                  f"directories of one configuration (compare two with --against)",
                  file=sys.stderr)
            sys.exit(2)


def load(dirs, what: str, command: str = "mujoco_table.py") -> pd.DataFrame:
    """``results.load``'s frame of the runs at or under ``dirs`` (its notes signed
    ``command``), refused (``one_configuration``) where a task's runs are of more than one
    configuration."""
    ev = results.load(dirs, command=command)
    one_configuration(ev, what)
    return ev


def label(env: str, task_options: str = "", version: bool = True) -> str:
    """A row's task: its name, with its version (``version``) and its own options where
    it has them ("Ant-v5 (include_cfrc_ext_in_observation=False)")."""
    name = f"{task_of(env)}-v{env.rsplit('-v', 1)[-1]}" if version else task_of(env)
    return f"{name} ({task_options})" if task_options else name


def digits(task: str) -> int:
    """Decimals shown for a task's returns: one where they are small (Reacher, Swimmer)."""
    return 1 if task in ("Reacher", "Swimmer") else 0


# the columns comparing a task's runs with Tianshou's own runs (NaN for a task it has none of)
_VS_TIANSHOU = ("tianshou_final", "tianshou_final_lo", "tianshou_final_hi",
                "tianshou_final_over_best", "final_over_tianshou_final", "p_over_tianshou",
                "p_over_tianshou_lo", "p_over_tianshou_hi")


def table(ev: pd.DataFrame, decay_after: int = 500_000, beside: bool = False) -> pd.DataFrame:
    """One row per task as trained (``tasks``) from ``results.load``'s frame of the sweep's
    runs; ``beside``: rows shown beside the table's own (labelled with their version and
    options, not counted)."""
    source = results.eval_source(ev)
    theirs = results.finals(tianshou_runs(source), source)
    rows = []
    for (env, kw), g in tasks(ev):
        task = task_of(env)
        f = results.finals(g, source)
        lo, hi = bootstrap_ci(f["final"])
        best, best_at = best_of_mean_curve(g, source)
        ts, cr = TIANSHOU.get(task), CLEANRL.get(task, np.nan)
        decays = decayed_seeds(g, f, source, decay_after)
        tf = theirs.loc[theirs["env"].map(task_of) == task, "final"].to_numpy(float)
        vs = dict.fromkeys(_VS_TIANSHOU, np.nan)
        if len(tf):
            c = compare(f["final"], tf)
            vs = dict(zip(_VS_TIANSHOU, (
                tf.mean(), *bootstrap_ci(tf), ratio(tf.mean(), ts),
                ratio(f["final"].mean(), tf.mean()), c["p_improvement"], c["p_lo"],
                c["p_hi"]), strict=True))
        rows.append({
            "task": task, "env": env, "task_options": kw, "beside": beside,
            "label": label(env, kw, beside),
            "seeds": len(f), "env_steps": int(f["env_steps"].max()),
            "final": f["final"].mean(), "final_lo": lo, "final_hi": hi,
            "final_per_seed": " ".join(f"{v:.1f}" for v in f["final"]),
            "best": best, "best_at": best_at, "tianshou": ts, "cleanrl": cr,
            "final_over_tianshou": np.nan if ts is None else ratio(f["final"].mean(), ts),
            **vs,
            "wall_time_min": g["wall_time_s"].max() / 60,
            "decayed": "; ".join(d.text(digits(task)) for d in decays),
            "peak_seeds": sum(d.kind == "peak" for d in decays),
            "noise_seeds": sum(d.kind == "noise" for d in decays),
            "declined": "; ".join(d.text(digits(task)) for d in decays if d.declined),
            "declining_seeds": sum(d.declined for d in decays), "decay_after": decay_after,
            "source": source})
    return pd.DataFrame(rows)


def against(ev: pd.DataFrame, other: pd.DataFrame, reps: int = 2000,
            seed: int = 0) -> pd.DataFrame:
    """Per task both frames have: these runs' and the other's mean final, and ``compare``'s
    difference and P(these > those), each with its CI."""
    mine, theirs = dict(iter(tasks(ev))), dict(iter(tasks(other)))
    rows = []
    for env, kw in sorted(set(mine) & set(theirs), key=lambda k: _rank(task_of(k[0]))):
        a = results.finals(mine[env, kw])["final"].to_numpy(float)
        b = results.finals(theirs[env, kw])["final"].to_numpy(float)
        rows.append({"task": label(env, kw, version=False), "env": env, "task_options": kw,
                     "seeds": len(a), "other_seeds": len(b),
                     "final": a.mean(), "other_final": b.mean(),
                     **compare(a, b, reps, seed)})
    return pd.DataFrame(rows)


def against_markdown(c: pd.DataFrame) -> str:
    lines = ["| task | these: final | the other: final | difference [95% CI] | "
             "P(these > the other) [95% CI] |", "|---|---:|---:|---|---|"]
    for r in c.itertuples():
        d = digits(r.task)
        lines.append(f"| {r.task} | {_num(r.final, d)} | {_num(r.other_final, d)} | "
                     f"{_num(r.difference, d)} [{_num(r.difference_lo, d)}, "
                     f"{_num(r.difference_hi, d)}] | {r.p_improvement:.2f} "
                     f"[{r.p_lo:.2f}, {r.p_hi:.2f}] |")
    return "\n".join(lines) + "\n"


def _rank(task: str) -> int:
    return TASK_ORDER.index(task) if task in TASK_ORDER else len(TASK_ORDER)


def ordered(t: pd.DataFrame) -> pd.DataFrame:
    """The table's rows in task order, each task's own row before rows beside it."""
    rank = t["task"].map(_rank)
    return (t.assign(rank=rank).sort_values(["rank", "beside"], kind="stable")
            .drop(columns="rank").reset_index(drop=True))


def _num(x, digits=0) -> str:
    return "—" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:,.{digits}f}"


def flagged(r) -> str:
    """The last column's cell: how many seeds the decay test flags, by kind, and each decline
    in full (every flagged seed in full is the CSV's ``decayed``)."""
    n = r.peak_seeds + r.noise_seeds + r.declining_seeds
    if not n:
        return "none"
    kinds = ", ".join(f"{k} {name}" for k, name in ((r.peak_seeds, "peak"),
                                                  (r.noise_seeds, "noise")) if k)
    cell = f"{n} of {r.seeds}" + (f" ({kinds})" if kinds else "")
    return cell + (f"; {r.declined}" if r.declining_seeds else "")


def _ci(x, lo, hi, d) -> str:
    return f"{_num(x, d)} [{_num(lo, d)}, {_num(hi, d)}]"


def markdown(t: pd.DataFrame) -> str:
    after = f"{t['decay_after'].iloc[0] / 1000:g}k"
    lines = ["| task | pgjax final [95% CI] | pgjax best during training | Tianshou final "
             "[95% CI] | Tianshou best (its figure) | final / Tianshou final | final / "
             "Tianshou best | P(pgjax > Tianshou) [95% CI] | cleanrl | wall time (min) | "
             f"seeds below 90% of their best after {after} (kinds; each decline with its "
             "mean over the same evaluations) |",
             "|---|---|---:|---|---:|---:|---:|---|---:|---:|---|"]
    for r in t.itertuples():
        d = digits(r.task)
        p = ("—" if np.isnan(r.p_over_tianshou) else
             f"{r.p_over_tianshou:.2f} [{r.p_over_tianshou_lo:.2f}, {r.p_over_tianshou_hi:.2f}]")
        lines.append(
            f"| {r.label} | {_ci(r.final, r.final_lo, r.final_hi, d)} | {_num(r.best, d)} | "
            f"{_ci(r.tianshou_final, r.tianshou_final_lo, r.tianshou_final_hi, d)} | "
            f"{_num(r.tianshou, d)} | {_num(r.final_over_tianshou_final, 2)} | "
            f"{_num(r.final_over_tianshou, 2)} | {p} | {_num(r.cleanrl, d)} | "
            f"{r.wall_time_min:.0f} | {flagged(r)} |")
    own = t[~t["beside"]]
    best, fin = own["final_over_tianshou"].dropna(), own["final_over_tianshou_final"].dropna()
    theirs = own["tianshou_final_over_best"].dropna()
    note = " (rows with a version are beside the table, not counted)" if t["beside"].any() else ""
    nose = (" (a seed whose records hold no episode spread counts as a decline when below "
            "its mean at all)" if t["decayed"].str.contains("no episode spread").any() else "")
    lines += ["", f"pgjax's final ≥ 0.9 × Tianshou's final (the mean of its evaluations over "
                  f"the same last 5% of 1M steps, from its per-seed curves) on "
                  f"{(fin >= 0.9).sum()} of {len(fin)} tasks, ≥ it on {(fin >= 1.0).sum()}; "
                  f"≥ 0.9 × Tianshou's figure (its best) on {(best >= 0.9).sum()} of "
                  f"{len(best)}, ≥ it on {(best >= 1.0).sum()}; Tianshou's own final reaches "
                  f"0.9 × its figure on {(theirs >= 0.9).sum()} of {len(theirs)}, the figure "
                  f"on {(theirs >= 1.0).sum()}. Seeds that ended below 90% of their best and "
                  f"more than two standard errors below their own mean after {after} "
                  f"(decline): {int(own['declining_seeds'].sum())} of "
                  f"{int(own['seeds'].sum())}{note}; SE: the final's standard error from its "
                  f"evaluations' episodes{nose}. Sources: Tianshou {_TIANSHOU} and "
                  f"{_TIANSHOU_RUNS}; cleanrl {_CLEANRL}."]
    return "\n".join(lines) + "\n"


def plot(ev: pd.DataFrame, t: pd.DataFrame, path: Path,
         title: str = "PPO, --preset mujoco") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    source = t["source"].iloc[0]
    n = len(t)
    cols = 3
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(4.2 * cols, 3.2 * ((n + 2) // 3)),
                             squeeze=False)
    theirs = tianshou_runs(source)

    def curve(runs: pd.DataFrame):
        pts = results.return_points(runs, source, keys=["run"])
        wide = pts.pivot_table(index="point", columns="run", values="value").dropna()
        steps = pts.groupby("point")["env_steps"].max().loc[wide.index]
        return steps, wide

    runs = dict(iter(tasks(ev)))
    for ax, r in zip(axes.flat, t.itertuples()):
        steps, wide = curve(runs[r.env, r.task_options])
        band = np.array([bootstrap_ci(row) for row in wide.to_numpy()])
        ax.plot(steps, wide.mean(1), color="C0", label="pgjax (mean of seeds)")
        ax.fill_between(steps, band[:, 0], band[:, 1], color="C0", alpha=0.25, lw=0)
        own = theirs[theirs["env"].map(task_of) == r.task]
        theirs_said = ""
        if len(own):
            ts_steps, ts_wide = curve(own)
            ax.plot(ts_steps, ts_wide.mean(1), color="C3", lw=1,
                    label=f"Tianshou (mean of its {ts_wide.shape[1]} seeds)")
            # the version Tianshou ran this panel's task at (v3, v2 for Reacher and pendulums)
            theirs_said = f"; Tianshou {own['env'].iloc[0].rsplit('-', 1)[-1]}"
        if r.tianshou is not None and not np.isnan(r.tianshou):
            ax.axhline(r.tianshou, color="C3", ls="--", lw=1, label="Tianshou 1M (best)")
        ax.set_title(f"{label(r.env)} ({r.seeds} seeds{theirs_said})"
                     + (f"\n{r.task_options}" if r.task_options else ""),
                     fontsize=8 if r.task_options else None)
        ax.set_xlabel("env steps")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{title}: {results.RETURN_LABELS[source]}, 95% bootstrap CI; each title "
                 f"names the task version Tianshou ran")
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="the sweep's directory (or run directories)")
    p.add_argument("--out", default="experiments/results/mujoco_v5")
    p.add_argument("--decay-after", type=int, default=500_000)
    p.add_argument("--title", default="PPO, --preset mujoco", help="the curves figure's title")
    p.add_argument("--beside", nargs="+", default=[], metavar="DIR",
                   help="runs of other task versions shown beside the table, not counted")
    p.add_argument("--against", nargs="+", default=[], metavar="DIR",
                   help="another configuration's runs of the same tasks: per task, the "
                        "difference of the finals and P(these > those), in against.{csv,md}")
    a = p.parse_args()
    own = ev = load(a.runs, "runs")
    t = table(ev, a.decay_after)
    if a.beside:
        ev_beside = load(a.beside, "--beside runs")
        t = pd.concat([t, table(ev_beside, a.decay_after, beside=True)], ignore_index=True)
        ev = pd.concat([ev, ev_beside], ignore_index=True)
    t = ordered(t)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t.to_csv(out / "table.csv", index=False)
    (out / "table.md").write_text(markdown(t))
    plot(ev, t, out / "curves.png", a.title)
    print(markdown(t))
    if a.against:
        c = against(own, load(a.against, "--against runs"))
        c.to_csv(out / "against.csv", index=False)
        (out / "against.md").write_text(against_markdown(c))
        print(against_markdown(c))


if __name__ == "__main__":
    main()
