"""The Preset record, and ``_same``: one set of options for several update rules at once."""
from __future__ import annotations

from typing import NamedTuple


class Preset(NamedTuple):
    name: str
    summary: str
    source: str  # repository @ commit: files the values come from
    options: dict  # option -> value, for every task
    per_task: dict = {}  # task key (see task_key) -> options for that task only
    deviations: tuple = ()  # what differs from the source, and why
    lines: dict = {}  # option -> the source line its value comes from (path:line)


def _same(rules, **values) -> dict:
    """The same rule options for each of ``rules``: {"ppo.lr": ..., "spo.lr": ...}."""
    return {f"{r}.{k}": v for r in rules for k, v in values.items()}
