"""Resuming a run directory: the config it must match, the checkpoints it may restore."""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import jax
import numpy as np

from pgjax.training.config import TrainConfig
from pgjax.core.errors import ConfigError
from pgjax.core import plugin_files


RESUME_IGNORED = ("resume", "overwrite", "quiet", "label", "name", "out", "tensorboard", "wandb", "wandb_project",
                  "distributed", "shard", "checkpoint_every", "checkpoint_seconds")


def config_differences(cfg: TrainConfig, saved, where) -> list[str]:
    """How ``cfg`` differs from a recorded config (``saved``: a ``"config"`` entry as
    ``to_dict`` wrote it; ``where``: the file it was read from), in what a resume must
    match: ``["ppo.lr (0.0003 recorded, 0.001 now)", ...]``, empty when it matches. A record
    that does not read back as a config is a one-line ``ConfigError``."""
    now = json.loads(json.dumps(cfg.to_dict(), default=str))
    # options whose spelling may differ while their effect is the same (a record written
    # before the option existed, ``auto``) are compared by what they resolve to
    from pgjax.training.config import LEGACY

    fix = "restore it from a copy, or pass --overwrite (a sweep: another --name)"
    if not isinstance(saved, dict):
        raise ConfigError(f"{where} is damaged (its config is not a table); {fix}")
    try:
        then = TrainConfig.from_record({**LEGACY, **saved}, plugins=cfg.plugins)
    except ConfigError as e:
        raise ConfigError(f"{where} is damaged ({e})".split("; ")[0] + f"; {fix}") from None
    except Exception as e:  # a hand-edited value of the wrong type
        raise ConfigError(f"{where} is damaged ({type(e).__name__} reading its config); "
                          f"{fix}") from None
    # the record read back as a config: an option added since reads as the recorded
    # behaviour (its default, or its LEGACY value)
    saved = json.loads(json.dumps(then.to_dict(), default=str))
    resolved = {"eval_mode": then.eval_modes == cfg.eval_modes,
                "anneal_steps": then.anneal_iterations == cfg.anneal_iterations}
    for f in dataclasses.fields(TrainConfig):  # how an env is stepped changes no result
        for field in getattr(f.default, "SPEED_ONLY", ()):
            for d in (saved, now):
                if isinstance(d.get(f.name), dict):
                    d[f.name].pop(field, None)
    diff = []
    for k in sorted(set(saved) | set(now)):
        if k in RESUME_IGNORED or k == "plugins" or resolved.get(k, saved.get(k) == now.get(k)):
            continue
        a, b = saved.get(k), now.get(k)
        if isinstance(a, dict) and isinstance(b, dict):  # a rule's options: name the field
            diff += [f"{k}.{f} ({a.get(f)!r} recorded, {b.get(f)!r} now)"
                     for f in sorted(set(a) | set(b)) if a.get(f) != b.get(f)]
        else:
            diff.append(f"{k} ({a!r} recorded, {b!r} now)")
    if any(d.startswith("anneal_steps") for d in diff):
        diff.append(f"(the recorded schedule spans {then.anneal_iterations} updates: "
                    f"--anneal-steps {then.anneal_iterations * then.batch_size} gives it)")
    return diff


def check_resumable(cfg: TrainConfig, root) -> None:
    from pgjax.loop.records import check_records, read_json

    saved = read_json(root / "config.json", "the run's config.json").get("config", {})
    check_records(root)
    diff = config_differences(cfg, saved, root / "config.json")
    # plugins are compared by content: the paths differ when resumed from another folder
    plugin_files.check_same(root, read_json(root / "config.json", "the run's config.json"),
                            cfg.plugins)
    if diff:
        raise ConfigError(f"cannot resume {root}: its config differs in {', '.join(diff)}; "
                          f"resume with the same options, or pick a new --name")


def warn(message: str) -> None:
    """A warning on stderr, shown even with --quiet."""
    print(f"pgjax: warning: {message}", file=sys.stderr, flush=True)


def _resume_plan(cfg: TrainConfig, root: Path) -> list[tuple[int, bool]]:
    """The checkpoint steps a resume may restore (with whether each is verified), in order, chosen from the files alone
    before anything compiles: checksum-verified ones, then (with a warning) ones without a
    checksum to verify; damaged ones are named and skipped; a checkpoint is usable only if
    every run's metrics reach it (the records are cut back to it, never forward). A
    directory with training recorded but nothing usable to continue from is refused with
    one line (never retrained over its records)."""
    from pgjax.loop.checkpoint import verified_steps
    from pgjax.loop.records import read_json, recorded_rows, run_status

    found = verified_steps(root / "checkpoint")
    rows = recorded_rows(root)
    record = read_json(root / "config.json", "the run's config.json")
    failed_at = {r["id"]: st.get("update", 0) for r in record["runs"]
                 if (st := run_status(root / "runs" / r["id"])) is not None}

    def reaches(step: int) -> bool:
        upto = step * cfg.iterations_per_chunk
        return all(rows[i] >= upto + 1 or failed_at.get(i, upto + 1) <= upto for i in rows)

    skipped = dict(found.damaged)  # step -> why it is not used
    uid = record.get("uid")
    for step in found.good + list(found.unverified):
        owner = _checkpoint_owner(root / "checkpoint" / str(step)) if uid else uid
        if owner != uid:  # copied in from another run directory
            skipped[step] = (f"it was saved by another run ({owner or 'unnamed'}, this run is "
                             f"{uid})")
        elif not reaches(step):
            skipped[step] = (f"ahead of its metrics: a run has {min(rows.values())} rows, the "
                             f"checkpoint is at iteration {step * cfg.iterations_per_chunk}")
    steps = [s for s in found.good + list(found.unverified) if s not in skipped]
    if not steps and skipped and max(rows.values(), default=0) > 1:
        step, why = max(skipped.items())
        every = "every checkpoint" if len(skipped) > 1 else "the checkpoint"
        raise ConfigError(f"{every} of {root} is damaged or unusable (checkpoint {step}: "
                          f"{why}); pass --overwrite to train it again (the old run is set "
                          f"aside in {root.parent / '.trash'})")
    for step, why in sorted(skipped.items(), reverse=True):
        warn(f"checkpoint {step} of {root} is {'damaged' if step in found.damaged else 'unusable'}"
             f" ({why}); resuming from an older one")
    for step, why in found.unverified.items():
        if step in steps:
            warn(f"checkpoint {step} of {root} cannot be verified ({why}); used only where no "
                 f"verified one is, and checked for non-finite values")
    return [(step, step in found.good) for step in steps]


def run_uid(root: Path) -> str | None:
    """The identity a run directory's config.json records (``uid``; None in records written
    before it existed)."""
    from pgjax.loop.records import read_json

    uid = read_json(root / "config.json", "the run's config.json").get("uid")
    return uid if isinstance(uid, str) else None


def _checkpoint_owner(step_dir: Path) -> str | None:
    """The run a checkpoint step was saved by (its meta's ``run``), or None."""
    try:
        meta = json.loads((step_dir / "meta" / "metadata").read_text())
    except (OSError, ValueError):
        return None
    return meta.get("run") if isinstance(meta, dict) else None


def _complete(cfg: TrainConfig, root: Path) -> bool:
    """Whether every run's metrics hold every iteration (or end at its recorded failure)."""
    from pgjax.loop.records import read_json, recorded_rows, run_status

    rows = recorded_rows(root)
    record = read_json(root / "config.json", "the run's config.json")
    return all(rows[r["id"]] == cfg.num_iterations + 1
               or run_status(root / "runs" / r["id"]) is not None for r in record["runs"])


def _recorded_failures(root: Path) -> set:
    """Indices of the runs whose own status.json records a failure."""
    from pgjax.loop.records import read_json, run_status

    record = read_json(root / "config.json", "the run's config.json")
    return {i for i, r in enumerate(record["runs"])
            if run_status(root / "runs" / r["id"]) is not None}


def _finite(state, failed: set) -> bool:
    """Whether the restored parameters and statistics of every run not recorded as failed
    are finite (a failed run's may be NaN: it kept training inside the vmap). With several
    processes every array is not addressable here: taken as finite."""
    if jax.process_count() > 1:
        return True
    for x in jax.tree.leaves((state.params, state.obs_stats)):
        x = np.asarray(x)
        if np.issubdtype(x.dtype, np.floating):
            keep = [i for i in range(x.shape[0]) if i not in failed]
            if not np.all(np.isfinite(x[keep])):
                return False
    return True

