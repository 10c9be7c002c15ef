"""Named presets: documented bundles of training settings that reproduce a source's setup.

A preset maps `pgjax train` option names to values (``<rule>.<field>`` for an update rule's
option; a preset may set several rules' options, so that ``--algo ppo`` with the SPO paper's
preset gives the paper's PPO baseline), plus per-task values (e.g. S2PG's clip range per
body). ``pgjax train --preset NAME`` applies one before the command-line flags, so every
explicit flag overrides it; sweep files take ``preset = "NAME"`` (or a ``[static]`` list).
``pgjax presets`` prints each with its source. Values were read from the sources' own code;
``deviations`` says what pgjax cannot express or does differently.
"""
from __future__ import annotations

import re

from pgjax.core.errors import ConfigError
from pgjax.training.preset_type import Preset
from pgjax.training.presets_brax import (  # noqa: F401 (re-exported)
    BRAX, HAPPO_PAPER, HAPPO_PAPER_MAPPO, PLAYGROUND_DMC)
from pgjax.training.presets_jaxmarl import JAXMARL_MAPPO  # noqa: F401
from pgjax.training.presets_mujoco import (  # noqa: F401
    CLEANRL, FIXPO_PAPER, FIXPO_PAPER_PPO, MUJOCO, S2PG_PAPER, S2PG_PAPER_BPTT,
    S2PG_PAPER_MEMORYLESS, SPO_PAPER)

PRESETS = {p.name: p for p in (CLEANRL, MUJOCO, SPO_PAPER, FIXPO_PAPER, FIXPO_PAPER_PPO, S2PG_PAPER,
                               S2PG_PAPER_MEMORYLESS, S2PG_PAPER_BPTT, HAPPO_PAPER, HAPPO_PAPER_MAPPO, BRAX,
                               PLAYGROUND_DMC, JAXMARL_MAPPO)}


def task_key(env: str) -> str:
    """The part of an environment id presets match per task: ``gym:Hopper-v5`` -> hopper,
    ``brax:inverted_pendulum`` -> inverted_pendulum, ``mabrax:walker2d_2x3`` ->
    walker2d_2x3."""
    name = env.split(":", 1)[-1].lower()
    return re.sub(r"-v\d+$", "", name).replace("-", "_")


def get(name: str) -> Preset:
    if name not in PRESETS:
        from pgjax.core.errors import did_you_mean

        raise ConfigError(f"unknown preset '{name}'{did_you_mean(name, PRESETS)}; use one of "
                          f"{', '.join(PRESETS)} (pgjax presets lists them)")
    return PRESETS[name]


def resolve(name: str, env: str) -> dict:
    """Every option preset ``name`` sets for environment ``env``, per-task values included
    (the task's own entry; for single-agent ids also a body name such as ``hopper``)."""
    p = get(name)
    key = task_key(env)
    per_task = p.per_task.get(key)
    if per_task is None:
        camel = {re.sub(r"[^a-z0-9]", "", k): k for k in p.per_task}
        per_task = p.per_task.get(camel.get(re.sub(r"[^a-z0-9]", "", key), ""), {})
    out = {**p.options, **per_task}
    if "steps" in out:  # the source's budget is its schedules' horizon unless it says another
        out.setdefault("anneal_steps", out["steps"])
    return out


def describe(p: Preset) -> str:
    """Text for ``pgjax presets``: summary, source, options, per-task values, deviations."""
    lines = [f"{p.name}: {p.summary}", f"  source: {p.source}", "  sets:"]
    lines += [f"    {k} = {v!r}" for k, v in p.options.items()]
    for task, opts in p.per_task.items():
        lines.append(f"  for {task}: " + ", ".join(f"{k} = {v!r}" for k, v in opts.items()))
    if p.lines:
        lines.append("  source lines:")
        lines += [f"    {k}: {v}" for k, v in p.lines.items()]
    if p.deviations:
        lines.append("  differs from the source:")
        lines += [f"    - {d}" for d in p.deviations]
    return "\n".join(lines)
