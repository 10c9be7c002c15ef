"""Markdown tables from the JSON written by ``benchmarks/vs_brax.py``.

    python benchmarks/report_vs_brax.py benchmarks/results/vs_brax.json
    python benchmarks/report_vs_brax.py benchmarks/results/playground_vs_brax.json
    python benchmarks/report_vs_brax.py benchmarks/results/playground_vs_brax.json \
        --trace benchmarks/results/playground_trace
"""
from __future__ import annotations

import argparse
import json
import statistics as st
from pathlib import Path


def fmt(x, nd=0):
    return f"{x:,.{nd}f}"


def comparison(res) -> list[str]:
    out = ["| env | seed | raw stepping pgjax / Brax env | pgjax | Brax | pgjax / Brax | "
           "pgjax / raw | Brax / raw | compile pgjax / Brax (s) | startup pgjax / Brax (s) | "
           "peak RSS pgjax / Brax (MB) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["comparison"]:
        p, b = r["pgjax"], r["brax"]
        out.append(f"| `{r['env']}` | {r['seed']} | {fmt(r['raw_sps'])} / "
                   f"{fmt(r['brax_raw_sps'])} | {fmt(p['steady_sps'])} | "
                   f"{fmt(b['steady_sps'])} | {r['pgjax_over_brax_sps']:.2f} | "
                   f"{r['pgjax_over_raw']:.2f} | {b['steady_sps'] / r['raw_sps']:.2f} | "
                   f"{p['compile_s']:.1f} / {b['compile_s']:.1f} | "
                   f"{p['startup_s']:.1f} / {b['startup_s']:.1f} | "
                   f"{fmt(p['peak_rss_mb'])} / {fmt(b['peak_rss_mb'])} |")
    out += ["", "Means over seeds:", "",
            "| env | pgjax / Brax throughput | pgjax / raw | Brax / raw | compile pgjax / Brax | "
            "startup pgjax / Brax | peak RSS pgjax / Brax |", "|---|---:|---:|---:|---:|---:|---:|"]
    for env in dict.fromkeys(r["env"] for r in res["comparison"]):
        rows = [r for r in res["comparison"] if r["env"] == env]
        m = lambda f: st.mean(f(r) for r in rows)
        out.append(f"| `{env}` | {m(lambda r: r['pgjax_over_brax_sps']):.2f} | "
                   f"{m(lambda r: r['pgjax_over_raw']):.2f} | "
                   f"{m(lambda r: r['brax']['steady_sps'] / r['raw_sps']):.2f} | "
                   f"{m(lambda r: r['pgjax']['compile_s'] / r['brax']['compile_s']):.2f} | "
                   f"{m(lambda r: r['pgjax']['startup_s'] / r['brax']['startup_s']):.2f} | "
                   f"{m(lambda r: r['pgjax']['peak_rss_mb'] / r['brax']['peak_rss_mb']):.2f} |")
    return out


def returns(res) -> list[str]:
    out = []
    for env in dict.fromkeys(r["env"] for r in res["comparison"]):
        rows = [r for r in res["comparison"] if r["env"] == env]
        out += [f"`{env}` (mean over {len(rows)} seeds; per seed in brackets):", "",
                "| env steps | pgjax | Brax |", "|---:|---|---|"]
        for i, pt in enumerate(rows[0]["pgjax"]["points"]):
            mine = [r["pgjax"]["points"][i]["eval_return"] for r in rows]
            theirs = [r["brax"]["points"][i]["eval_return"] for r in rows]
            steps_b = {r["brax"]["points"][i]["env_steps"] for r in rows}
            assert steps_b == {pt["env_steps"]}, (steps_b, pt["env_steps"])
            cell = lambda v: f"{st.mean(v):.0f} ({', '.join(f'{x:.0f}' for x in v)})"
            out.append(f"| {fmt(pt['env_steps'])} | {cell(mine)} | {cell(theirs)} |")
        out.append("")
    return out


def default_pool(res) -> list[str]:
    out = ["| env | pgjax, pool per rollout | pgjax, fixed pool (seed 0) | Brax (seed 0) | "
           "compile: per rollout / fixed / Brax (s) |", "|---|---:|---:|---:|---:|"]
    for d in res["default_pool"]:
        env = d["env"]
        r = next(r for r in res["comparison"] if r["env"] == env and r["seed"] == 0)
        p = d["pgjax_default"]
        out.append(f"| `{env}` | {fmt(p['steady_sps'])} | {fmt(r['pgjax']['steady_sps'])} | "
                   f"{fmt(r['brax']['steady_sps'])} | {p['compile_s']:.1f} / "
                   f"{r['pgjax']['compile_s']:.1f} / {r['brax']['compile_s']:.1f} |")
    return out


def scaling(res) -> list[str]:
    envs = [r for r in res["scaling"] if r["kind"] == "num_envs"]
    seeds = [r for r in res["scaling"] if r["kind"] == "seeds"]
    out = []
    if envs:
        out += [f"Number of environments (`{envs[0]['env']}`, one seed):", "",
                "| envs | steps/s | compile (s) | peak RSS (MB) |", "|---:|---:|---:|---:|"]
        out += [f"| {r['num_envs']} | {fmt(r['steady_sps'])} | {r['compile_s']:.1f} | "
                f"{fmt(r['peak_rss_mb'])} |" for r in envs]
        out.append("")
    if seeds:
        one = next(r for r in seeds if r["seeds"] == 1)
        out += [f"Vmapped seeds (`{seeds[0]['env']}`, {seeds[0]['num_envs']} envs per seed):",
                "", "| seeds | total steps/s | steps/s per seed | time per seed / one separate "
                "run | compile (s) | peak RSS (MB) |", "|---:|---:|---:|---:|---:|---:|"]
        out += [f"| {r['seeds']} | {fmt(r['steady_sps'])} | {fmt(r['steady_sps'] / r['seeds'])} | "
                f"{one['steady_sps'] / r['steady_sps']:.2f} | {r['compile_s']:.1f} | "
                f"{fmt(r['peak_rss_mb'])} |" for r in seeds]
    return out


def _spread(s: dict, side: str) -> str:
    lo, hi = s[f"{side}_ci95"]
    return f"{fmt(s[f'{side}_final'])} [{fmt(lo)}, {fmt(hi)}]"


def playground(res) -> list[str]:
    """``--playground``'s results: per task each side's final returns, the verdict on pgjax
    against Brax's trainer and the whole-process time per env step; a task still running
    shows the Brax seeds it has."""
    out = ["| task | Brax's trainer: final [95% CI] | pgjax: final [95% CI] | pgjax against "
           "Brax | whole process, µs per env step: pgjax / Brax | per seed: pgjax; Brax |",
           "|---|---|---|---|---:|---|"]
    for task, row in res.items():
        if task == "settings":
            continue
        theirs = [row["brax"][k]["points"][-1]["eval_return"]
                  for k in sorted(row["brax"], key=int)]
        per_seed = "; ".join(", ".join(fmt(x) for x in v)
                             for v in (row.get("pgjax", {}).get("finals", []), theirs))
        s = row.get("summary")
        if s is None:  # not finished: the Brax seeds so far
            out.append(f"| {task} | {len(theirs)} seeds so far | not run yet | | | "
                       f"{per_seed} |")
            continue
        diff = (f" ({s['difference']:+,.0f} [{s['difference_ci95'][0]:+,.0f}, "
                f"{s['difference_ci95'][1]:+,.0f}])" if "difference" in s else "")
        out.append(f"| {task} | {_spread(s, 'brax')} | {_spread(s, 'pgjax')} | "
                   f"**{s['verdict']}**{diff} | {s['pgjax_us_per_step']:.0f} / "
                   f"{s['brax_us_per_step']:.0f} | {per_seed} |")
    return out


# options that name where a run is written, not how it trains
_WHERE = ("name", "out", "overwrite", "quiet")


def trace(res: dict, folder: Path, table_runs: Path) -> list[str]:
    """The runs that trace a gap (``folder``: one run directory per change, named
    ``<Task>_<change>``, each ``vs_brax.py --playground``'s pgjax command with options
    changed) against the table's pgjax runs of their task (``table_runs/<Task>``) and Brax's
    trainer (``res``): the options changed, final returns and the two verdicts."""
    import numpy as np

    from pgjax.analysis import results
    from pgjax.training.config import TrainConfig
    from pgjax.training.options import flat_options

    def options(run: Path) -> dict:  # every option, those recorded before it existed too
        recorded = json.loads((run / "config.json").read_text())["config"]
        return flat_options(TrainConfig.from_record(recorded).to_dict())

    out = ["| task | options changed from the table's pgjax runs | final [95% CI] | against "
           "the table's pgjax | against Brax's trainer | per seed |", "|---|---|---|---|---|---|"]
    for run in sorted(p for p in folder.iterdir() if (p / "config.json").exists()):
        task = run.name.split("_", 1)[0]
        mine, base = options(run), options(table_runs / task)
        changed = ", ".join(f"`{k}` {mine.get(k)}" for k in sorted(set(mine) | set(base))
                            if k not in _WHERE and mine.get(k) != base.get(k))
        final = results.finals(results.load([run], command="report_vs_brax.py"))
        if len(final) == 0 or (final["env_steps"] != res["settings"]["steps"]).any():
            out.append(f"| {task} | {changed or 'none'} | not finished | | | |")
            continue  # a run still going (or stopped early) gives no final return
        f = final.sort_values("seed")["final"].to_numpy(float)
        pgjax = np.asarray(res[task]["pgjax"]["finals"], float)
        brax = np.asarray([res[task]["brax"][k]["points"][-1]["eval_return"]
                           for k in sorted(res[task]["brax"], key=int)], float)
        said = []
        for other in (pgjax, brax):
            try:
                v = results.verdict(f, other)
                said.append(f"**{v.outcome}** ({v.difference:+,.0f} [{v.ci95[0]:+,.0f}, "
                            f"{v.ci95[1]:+,.0f}])")
            except results.VerdictError as e:
                said.append(f"no verdict ({e})")
        lo, hi = results.ci_or_range(f)
        out.append(f"| {task} | {changed or 'none'} | {fmt(f.mean())} [{fmt(lo)}, {fmt(hi)}] | "
                   f"{said[0]} | {said[1]} | {', '.join(fmt(x) for x in f)} |")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json")
    p.add_argument("--trace", type=Path, default=None,
                   help="(--playground's JSON) instead of its table, the runs tracing a gap "
                        "in this folder, against the table's runs")
    a = p.parse_args()
    res = json.loads(open(a.json).read())
    if a.trace is not None:
        print("\n".join(trace(res, a.trace, Path(a.json).with_suffix(""))))
        return
    if "comparison" not in res:  # vs_brax.py --playground
        print("\n".join(playground(res)))
        return
    s = res["settings"]
    print(f"{res['machine']}, {res['cpus']} CPUs, {res['device']}, pgjax on jax "
          f"{res['pgjax_jax']}; {s['num_envs']} envs, unroll {s['unroll']}, "
          f"{s['steps']:,} steps, backend {s['backend']}\n")
    for part in (comparison, returns, default_pool, scaling):
        lines = part(res)
        if lines:
            print("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
