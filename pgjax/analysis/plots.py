"""A finished run directory's own summary: ``curve.png`` (mean over seeds with a 95%
percentile-bootstrap band, the seeds' range below ``MIN_SEEDS``) and ``summary.csv`` (final return per group), read through
``pgjax.analysis.results``; and what every pgjax figure shares: the legend under its axes and
compact PNG files."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from pgjax.core.evaluation import DETERMINISTIC, TRAIN_RETURN
from pgjax.analysis import results
from pgjax.analysis.results import (MIN_SEEDS, RETURN_LABELS, bootstrap_cis, curve_source,
                                    eval_source, return_points, spread_label)


def curve_table(points: pd.DataFrame, x: str = "env_steps") -> pd.DataFrame:
    """Mean over runs with a 95% bootstrap CI (``bootstrap_ci``; below ``MIN_SEEDS`` runs
    their range, see ``band_label``) at every point of ``return_points``: one row per group
    and point, in their order."""
    columns = ["group", x, "mean", "lo", "hi", "n"]
    if not len(points):
        return pd.DataFrame(columns=columns)
    by = points.groupby(["group", "point"])
    code = by.ngroup().to_numpy()
    order = np.argsort(code, kind="stable")  # each (group, point)'s rows, in their order
    cuts = np.cumsum(np.bincount(code))[:-1]
    values = np.split(points["value"].to_numpy(float)[order], cuts)
    xs = np.split(points[x].to_numpy(float)[order], cuts)
    ci = bootstrap_cis(values)
    for i, v in enumerate(values):  # too few runs for an interval: their range, said so
        if len(v) < MIN_SEEDS:
            ci[i] = v.min(), v.max()
    keys = by.size().index
    return pd.DataFrame({"group": keys.get_level_values("group"),
                         x: [v.mean() for v in xs], "mean": [v.mean() for v in values],
                         "lo": ci[:, 0], "hi": ci[:, 1], "n": [len(v) for v in values]},
                        columns=columns)


def band_label(n: int) -> str:
    """What a curve's band over ``n`` runs is (``curve_table``), for its legend entry."""
    return f"n={n}" + ("" if n >= MIN_SEEDS else ", band: range")


BAND_AXIS = f"mean; band: 95% CI, the range below {MIN_SEEDS} runs"


# groups a run directory's curve.png draws with their band and legend entry (the default
# colour cycle's ten): a larger grid draws the ten with the highest last point so, and the
# others' mean curves as thin grey lines under one legend entry (summary.csv lists each)
CURVES_SHOWN = 10


PNG_COLORS = 256


def compact_png(path) -> None:
    """Rewrite the PNG at ``path`` with an adaptive palette of ``PNG_COLORS`` colours
    (median cut, no dithering) over a white background: a line plot's pixels take far fewer
    colours than that, so the figure looks the same at about a third of the bytes."""
    from PIL import Image

    with Image.open(path) as im:
        rgba = im.convert("RGBA")
    flat = Image.new("RGBA", rgba.size, "white")
    flat.alpha_composite(rgba)
    flat.convert("RGB").quantize(colors=PNG_COLORS, method=Image.Quantize.MEDIANCUT,
                                 dither=Image.Dither.NONE).save(path, optimize=True)


def save_png(fig, path, dpi: int = 120) -> None:
    """``fig`` as a compact PNG at ``path`` (``compact_png``), written atomically: a link at
    ``path`` is replaced, never written through."""
    from pgjax.core.files import atomic_output

    with atomic_output(path) as tmp:
        fig.savefig(tmp, dpi=dpi)
        compact_png(tmp)


def legend_below(fig, ax, width: int = 120) -> None:
    """The legend of ``ax``'s lines under the axes, one entry per line, long group names
    wrapped at ``width`` characters, the figure made taller to hold it: group names carry
    every option in which the runs differ, so a legend inside the axes would hide the
    curves or run off the figure."""
    import textwrap

    handles, labels = ax.get_legend_handles_labels()
    if not handles:  # nothing to label: no episode ended yet
        fig.tight_layout()
        return
    labels = [textwrap.fill(label, width, subsequent_indent="  ", break_on_hyphens=False)
              for label in labels]
    rows = sum(label.count("\n") + 1 for label in labels)
    extra = 0.14 * rows + 0.15  # inches: 7-pt lines and a margin
    height = fig.get_figheight() + extra  # the axes keep their size; the figure grows
    fig.set_figheight(height)
    share = extra / height
    fig.legend(handles, labels, loc="lower left", bbox_to_anchor=(0.01, 0.0), fontsize=7,
               frameon=False)
    fig.tight_layout(rect=(0, share, 1, 1))


def plot_curves(df: pd.DataFrame, path, title: str = "", x: str = "env_steps") -> None:
    """Learning curves of one run directory (``results.metrics``): per group the mean over
    runs with a 95% bootstrap band, of the evaluations or, where they are too few, of the
    training episodes with the evaluations as markers (``curve_source``)."""
    from matplotlib.figure import Figure  # no pyplot: leaves the caller's backend alone

    table = results.run_table(df)
    failed = table[table["status"] == "failed"].groupby("group").size().to_dict()
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    source = curve_source(df) if len(df) else DETERMINISTIC.return_column
    marks = None
    if len(df):
        marks = curve_table(return_points(df, eval_source(df)), x) \
            if source == TRAIN_RETURN and eval_source(df) != TRAIN_RETURN else None
        curve = curve_table(return_points(df, source), x)
        last = curve.groupby("group")["mean"].last()
        shown = set(last.sort_values(ascending=False, kind="stable").index[:CURVES_SHOWN])
        marks = marks[marks["group"].isin(shown)] if marks is not None else None
        rest = []
        for group, g in curve.groupby("group"):
            if group not in shown:
                rest.append(np.column_stack([g[x].to_numpy(float), g["mean"].to_numpy(float)]))
                continue
            more = f", {failed[group]} failed" if group in failed else ""
            line, = ax.plot(g[x], g["mean"], label=f"{group} ({band_label(g['n'].max())}"
                                                     f"{more})")
            ax.fill_between(g[x], g["lo"], g["hi"], alpha=0.25, color=line.get_color())
            if marks is not None:
                m = marks[marks["group"] == group]
                ax.errorbar(m[x].to_numpy(), m["mean"].to_numpy(),
                            yerr=np.stack([(m["mean"] - m["lo"]).to_numpy(),
                                           (m["hi"] - m["mean"]).to_numpy()]),
                            fmt="o", color=line.get_color(), capsize=3, ms=4)
        if rest:  # one artist for any number of them
            from matplotlib.collections import LineCollection

            ax.add_collection(LineCollection(
                rest, colors="0.55", linewidths=0.5, alpha=0.5, zorder=1,
                label=f"the other {len(rest)} groups' means (the {len(shown)} drawn in colour "
                      f"end highest; summary.csv lists every group)"))
            ax.autoscale_view()
    lost = sorted(set(failed) - set(df["group"] if len(df) else ()))
    for group in lost[:CURVES_SHOWN]:
        ax.plot([], [], label=f"{group} (every run failed: {failed[group]})")
    if len(lost) > CURVES_SHOWN:
        ax.plot([], [], label=f"{len(lost) - CURVES_SHOWN} more groups in which every run "
                              f"failed (summary.csv)")
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel(f"{RETURN_LABELS[source]}\n({BAND_AXIS})", fontsize=8)
    if source == TRAIN_RETURN and marks is not None:
        ax.set_title(f"{title}\nlines: training episodes; markers: held-out evaluations",
                     fontsize=9)
    elif source == TRAIN_RETURN:
        ax.set_title(f"{title}\nlines: training episodes (no held-out evaluation)", fontsize=9)
    else:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    legend_below(fig, ax, width=90)
    save_png(fig, path)


def summarize(root, df: pd.DataFrame | None = None) -> pd.DataFrame:
    """Final return per group over its finished runs (``results.finals``: the mean of the
    evaluations over the last 5% of training): mean, 95% CI over seeds (blank below
    ``MIN_SEEDS`` seeds, where ``spread`` says the range is shown) and per-seed values,
    next to the number of runs, of failed runs and their failures (run, update, error), so
    an aggregate over fewer runs than were started is never silent. ``df``: the directory's
    ``results.metrics``, where the caller has read them already."""
    root = Path(root)
    df = directory_rows(root) if df is None else df
    table = results.run_table(df)
    final = results.finals(df)
    ok = final[final["status"] != "failed"]
    where = ok.groupby("group", sort=False).indices  # each group's rows, once for all
    value, steps, k, last = (ok[c].to_numpy() for c in ("final", "env_steps", "k", "last"))
    runs = table.groupby("group", sort=False).size()
    failed = dict(tuple(table[table["status"] == "failed"].groupby("group", sort=False)))
    none = np.zeros(0, int)
    ci = bootstrap_cis([value[where.get(group, none)] for group in runs.index])
    returns = RETURN_LABELS[final["source"].iloc[0]] if len(final) else ""
    rows = []
    for (group, n), (lo, hi) in zip(runs.items(), ci):
        at = where.get(group, none)
        fails = failed.get(group, table.iloc[:0])
        few = len(at) < MIN_SEEDS  # the bootstrap's interval would be about the range
        rows.append({"group": group, "seeds": len(at), "runs": int(n),
                     "failed_runs": len(fails),
                     "env_steps": int(steps[at].max()) if len(at) else 0,
                     "final_eval_return_mean": value[at].mean() if len(at) else np.nan,
                     "ci95_lo": np.nan if few else lo, "ci95_hi": np.nan if few else hi,
                     "spread": spread_label(len(at)),
                     "range_lo": value[at].min() if len(at) else np.nan,
                     "range_hi": value[at].max() if len(at) else np.nan,
                     "evals_averaged": int(k[at].max()) if len(at) else 0,
                     "returns": returns,
                     "per_seed": " ".join(f"{v:.1f}" for v in value[at]),
                     "per_seed_last_eval": " ".join(f"{v:.1f}" for v in last[at]),
                     "failures": "; ".join(f"{f.id}: update {f.failed_update}: {f.error}"
                                           for f in fails.itertuples()) if len(fails) else ""})
    out = pd.DataFrame(rows)
    from pgjax.core.files import write_csv

    write_csv(out, root / "summary.csv")
    return out


def directory_rows(root: Path) -> pd.DataFrame:
    """Every metrics row of run directory ``root``, finished or not (no note)."""
    return results.metrics([root], include_unfinished=True, command="")


def plot_run(root, df: pd.DataFrame | None = None) -> None:
    root = Path(root)
    cfg = json.loads((root / "config.json").read_text())
    plot_curves(directory_rows(root) if df is None else df, root / "curve.png",
                title=f"{cfg['config']['algo']} on {cfg['config']['env']}")
