"""Bootstrap confidence intervals: percentile intervals of means, rliable's stratified bootstrap."""
from __future__ import annotations

import numpy as np


def bootstrap_ci(x, n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean of x (over seeds)."""
    x = np.asarray(x, float)
    if len(x) < 2:
        return float(x.mean()), float(x.mean())
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), (n, len(x)))].mean(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def bootstrap_cis(samples, n: int = 2000, seed: int = 0) -> np.ndarray:
    """[len(samples), 2]: ``bootstrap_ci`` of each sample, the same numbers, with the samples
    of one size resampled together (``bootstrap_ci`` draws the same indices for every sample
    of a size)."""
    out = np.full((len(samples), 2), np.nan)
    sizes = {}
    for i, x in enumerate(samples):
        sizes.setdefault(len(x), []).append(i)
    for m, which in sizes.items():
        xs = np.array([np.asarray(samples[i], float) for i in which]).reshape(len(which), m)
        if m < 2:
            out[which] = xs.mean(1, keepdims=True) if m else np.nan
            continue
        draw = np.random.default_rng(seed).integers(0, m, (n, m))
        step = max(1, 4_000_000 // (n * m))
        for start in range(0, len(which), step):
            rows = which[start:start + step]
            # [samples x n, m] rows averaged as bootstrap_ci's [n, m] are (same sum order)
            means = xs[start:start + step][:, draw].reshape(-1, m).mean(1).reshape(-1, n)
            out[rows, 0] = np.percentile(means, 2.5, axis=1)
            out[rows, 1] = np.percentile(means, 97.5, axis=1)
    return out


def probability_of_improvement(scores_x, scores_y) -> float:
    """P(X > Y) of two [runs, tasks] score matrices as ``rliable.metrics`` defines it: per
    task, the fraction of (x run, y run) pairs with x above y, ties counting half (the
    Mann-Whitney U over the number of pairs), averaged over the tasks. The same value as
    rliable's, counted with arrays rather than one scipy test per task, which is what the
    bootstrap's thousands of calls spend their time on."""
    x, y = np.asarray(scores_x, float), np.asarray(scores_y, float)
    if np.isnan(x).any() or np.isnan(y).any():
        return np.nan  # as scipy's test gives
    above = (x[:, None, :] > y[None, :, :]).sum((0, 1))
    ties = (x[:, None, :] == y[None, :, :]).sum((0, 1))
    # U = above + ties / 2 exactly, divided once by the pairs: rliable's value to the bit
    return float(np.mean((above + 0.5 * ties) / (len(x) * len(y))))


# The stratified bootstrap, all resamples at once. rliable's ``get_interval_estimates`` (after
# ``np.random.seed(seed)``) draws, for every key in turn and every resample, the row indices
# of each score array with ``np.random.choice(runs, shape)``: runs resampled independently
# within each task (and each further index, e.g. each curve point), one Python call and one
# call of the statistic per resample. The same draws, in the same order from the same
# ``RandomState`` stream, are made here in one call per key, and the statistic is computed
# on [resamples, ...] arrays: the same intervals as rliable's, to the last bit where the
# statistic sums in the same order (``interval_estimates``).


def _stream_indices(rs, blocks, reps: int) -> list:
    """What ``for _ in range(reps): for n, shape in blocks: rs.randint(0, n, shape)`` draws
    (each block's draws stacked: ``[reps, *shape]``), leaving ``rs`` where that loop would.
    Legacy ``randint`` draws a value below ``n`` as the first 32-bit output whose low bits
    (under ``n - 1``'s bit mask) are below ``n``; blocks of one range in a row are therefore
    one call, and blocks of several ranges are read off the raw 32-bit stream."""
    sizes = [int(np.prod(shape)) for _, shape in blocks]
    out = [np.zeros((reps, s), np.int64) for s in sizes]
    live = [i for i, (n, _) in enumerate(blocks) if n > 1 and sizes[i]]  # n = 1 draws nothing
    ranges = {blocks[i][0] for i in live}
    if len(ranges) == 1:
        drawn = rs.randint(0, ranges.pop(), (reps, sum(sizes[i] for i in live)))
        at = 0
        for i in live:
            out[i] = drawn[:, at:at + sizes[i]]
            at += sizes[i]
    elif live:
        _mixed_ranges(rs, blocks, sizes, live, reps, out)
    return [o.reshape(reps, *shape) for o, (_, shape) in zip(out, blocks)]


def _mixed_ranges(rs, blocks, sizes, live, reps, out) -> None:
    """``_stream_indices`` for blocks of different ranges: the raw stream is drawn, each
    block takes its values off it in turn (32-bit output masked, too large ones skipped),
    and ``rs`` is then moved on by exactly what was used."""
    need = reps * sum(sizes[i] for i in live)
    state = rs.get_state()
    length = 3 * need + 1024
    while True:
        rs.set_state(state)
        raw = rs.randint(0, 2 ** 32, length, dtype=np.uint32).astype(np.int64)
        masks = {n: (1 << int(n - 1).bit_length()) - 1 for n in {blocks[i][0] for i in live}}
        ok = {n: (raw & m) < n for n, m in masks.items()}
        before = {n: np.concatenate([[0], np.cumsum(a)]).tolist() for n, a in ok.items()}
        where = {n: np.flatnonzero(a) for n, a in ok.items()}
        spots = {n: w.tolist() for n, w in where.items()}
        firsts = np.empty((reps, len(live)), np.int64)
        p = 0
        try:
            for r in range(reps):
                for j, i in enumerate(live):
                    n = blocks[i][0]
                    first = before[n][p]  # accepted outputs of this range before p
                    firsts[r, j] = first
                    p = spots[n][first + sizes[i] - 1] + 1
        except IndexError:  # a rare run of rejections: draw a longer stream
            length *= 2
            continue
        break
    for j, i in enumerate(live):
        n = blocks[i][0]
        pos = where[n][firsts[:, j, None] + np.arange(sizes[i])]
        out[i] = raw[pos] & masks[n]
    rs.set_state(state)
    rs.randint(0, 2 ** 32, p, dtype=np.uint32)


def _trimmed_iqm(flat):
    """The 25% trimmed mean along the last axis, as ``scipy.stats.trim_mean`` computes it
    (the same partition, then the mean of the middle); NaN where a row has one."""
    m = flat.shape[-1]
    lo = int(0.25 * m)
    part = np.partition(flat, (lo, m - lo - 1), axis=-1)
    out = part[..., lo:m - lo].mean(-1)
    return np.where(np.isnan(flat).any(-1), np.nan, out)


# rliable's aggregate estimators on [..., runs, tasks] arrays, one value per leading index
ESTIMATORS = {
    "iqm": lambda x: _trimmed_iqm(x.reshape(*x.shape[:-2], -1)),
    "mean": lambda x: x.mean(-2).mean(-1),
    "median": lambda x: np.median(x.mean(-2), axis=-1),
}


def aggregate_estimates(x, names=tuple(ESTIMATORS)):
    """[..., len(names)]: each aggregate estimator of ``x`` ([..., runs, tasks])."""
    x = np.ascontiguousarray(x, float)
    return np.stack([ESTIMATORS[k](x) for k in names], axis=-1)


def point_estimates(name: str):
    """A statistic for ``interval_estimates``: estimator ``name`` of [runs, tasks, points]
    scores at each point, [..., points] (rliable's ``est(s[..., i])`` for every i)."""
    def stat(x):
        x = np.ascontiguousarray(np.moveaxis(x, -1, -3))  # [..., points, runs, tasks]
        return ESTIMATORS[name](x)
    return stat


def improvement_probabilities(x, y):
    """``probability_of_improvement`` of each pair of resampled score matrices
    (``x``: [..., runs_x, tasks], ``y``: [..., runs_y, tasks]); NaN where one holds a NaN."""
    pairs = x.shape[-2] * y.shape[-2]
    if np.isfinite(x).all() and np.isfinite(y).all():
        # one pass: the signs of x - y sum to above - below, so (pairs + sum) / 2 is
        # above + ties / 2, the same number exactly
        signs = np.sign(x[..., :, None, :] - y[..., None, :, :])
        signs = signs.reshape(*signs.shape[:-3], pairs, signs.shape[-1]).sum(-2)
        return np.mean(0.5 * (pairs + signs) / pairs, axis=-1)
    above = (x[..., :, None, :] > y[..., None, :, :]).sum((-3, -2))
    ties = (x[..., :, None, :] == y[..., None, :, :]).sum((-3, -2))
    p = np.mean((above + 0.5 * ties) / pairs, axis=-1)
    bad = np.isnan(x).any((-2, -1)) | np.isnan(y).any((-2, -1))
    return np.where(bad, np.nan, p)


def interval_estimates(scores: dict, statistic, reps: int = 2000, seed: int = 0,
                       size: float = 0.95, chunk: int = 4_000_000) -> tuple[dict, dict]:
    """rliable's ``get_interval_estimates(scores, ..., reps=reps)`` after
    ``np.random.seed(seed)`` (percentile intervals of the stratified bootstrap: each score
    array, [runs, tasks, ...], has its runs resampled independently within every task and
    further index), with the resamples drawn and evaluated as arrays. ``scores``: {key:
    array}, or {key: (array, array)} resampled independently (probability of improvement);
    ``statistic``: of arrays with leading axes (``[..., runs, tasks, ...]``, one argument
    per array), giving ``[..., k...]``. Returns ({key: point estimate}, {key: [2, k...]
    lower and upper bounds}), as rliable does. The draws are rliable's, in its order, from
    a ``RandomState(seed)`` of this call's own: keys whose arrays have the same shapes are
    drawn and evaluated together, ``chunk`` elements at a time."""
    rs = np.random.RandomState(seed)
    data = {k: tuple(np.asarray(a, float) for a in ((v,) if isinstance(v, np.ndarray) else v))
            for k, v in scores.items()}
    keys, points, intervals = list(data), {}, {}
    alpha = (1.0 - size) / 2  # as arch's percentile interval computes its bounds
    i = 0
    while i < len(keys):
        shapes = [a.shape for a in data[keys[i]]]
        per_rep = sum(int(np.prod(s)) for s in shapes) + (  # what one resample holds
            int(np.prod(shapes[0])) * shapes[1][0] if len(shapes) == 2 else 0)
        batch = keys[i:i + 1]
        while i + len(batch) < len(keys) and (len(batch) + 1) * reps * per_rep <= chunk \
                and [a.shape for a in data[keys[i + len(batch)]]] == shapes:
            batch.append(keys[i + len(batch)])
        i += len(batch)
        stacked = [np.stack([data[k][j] for k in batch]) for j in range(len(shapes))]
        point = statistic(*stacked)  # [keys, k...]
        rows, values = len(batch) * reps, []  # (key, resample) pairs, in rliable's order
        step = max(1, chunk // max(per_rep, 1))
        for start in range(0, rows, step):
            n = min(step, rows - start)
            idx = _stream_indices(rs, [(s[0], s) for s in shapes], n)
            key = (start + np.arange(n)) // reps
            resampled = []
            for a, ix in zip(stacked, idx):  # a[key, ix, j] for each further index j
                flat = ix.reshape(n, a.shape[1], -1)
                width = flat.shape[-1]
                pos = (key[:, None, None] * a.shape[1] + flat) * width + np.arange(width)
                resampled.append(a.ravel()[pos].reshape(ix.shape))
            values.append(statistic(*resampled))
        values = np.concatenate(values).reshape(len(batch), reps, *point.shape[1:])
        bounds = np.percentile(values, [100 * alpha, 100 * (1.0 - alpha)], axis=1)
        for j, k in enumerate(batch):
            points[k], intervals[k] = point[j], bounds[:, j]
    return points, intervals
