"""The registries of pgjax's four component kinds (env families, policy kinds, update rules,
agent schemes): name -> component, each with the file that registered it.

Built-in components register themselves here exactly as a plugin does (``--plugins``), and
everything that turns a name into a component (the config, the trainer, eval, render,
load_policy, help texts, presets) asks these registries, so no module outside a component
matches its name.
"""
from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Generic, Iterator, TypeVar

from pgjax.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Components of one kind by name; ``get`` refuses an unknown name with one line that
    lists the registered ones and says where to pass the name."""

    def __init__(self, kind: str, where: str):
        self.kind, self.where = kind, where
        self._items: dict[str, T] = {}
        self._origins: dict[str, str] = {}
        self._removed: dict[str, tuple] = {}

    def register(self, name: str, component: T, *, replace: bool = False,
                 origin: str | None = None) -> T:
        """Add ``component`` under ``name``. The same file registering again (a re-import)
        replaces it; another file registering the name is an error naming both, unless
        ``replace``."""
        if not isinstance(name, str) or not name or not name.replace("_", "").replace(
                "-", "").isalnum():
            raise ValueError(f"{self.kind} name {name!r} must be a non-empty word (letters, "
                             f"digits, '_' or '-')")
        origin = origin or caller_file(3)
        if name in self._items and not replace and not _same_source(self._origins[name],
                                                                    origin):
            raise ValueError(f"{self.kind} '{name}' is registered twice: by "
                             f"{self._origins[name]} and by {origin}; rename one of them (or "
                             f"pass replace=True)")
        self._items[name], self._origins[name] = component, origin
        return component

    def get(self, name: str, *default) -> T:
        """The component ``name``; ``default`` (when given) for an unknown name, else a
        ``ConfigError``."""
        if name not in self._items and default:
            return default[0]
        if name not in self._items:
            from pgjax.errors import did_you_mean

            raise ConfigError(f"unknown {self.kind} '{name}'{did_you_mean(name, self._items)}; "
                              f"{self.where} one of "
                              f"{', '.join(self._items)} (or register one from --plugins)")
        return self._items[name]

    def origin(self, name: str) -> str:
        """The file that registered ``name``."""
        return self._origins[name]

    def builtin(self, name: str) -> bool:
        """Whether ``name`` was registered by pgjax itself (not by a plugin)."""
        return Path(__file__).parent in Path(self._origins.get(name, "/")).parents

    def __getitem__(self, name: str) -> T:
        return self._items[name]

    def __setitem__(self, name: str, component: T) -> None:
        """As a dict (a test's patching): a component removed by ``del`` comes back with
        its origin."""
        removed = self._removed.pop(name, (None, None))
        origin = removed[1] if removed[0] is component else caller_file()
        self._items[name], self._origins[name] = component, origin

    def __delitem__(self, name: str) -> None:
        self._removed[name] = (self._items.pop(name), self._origins.pop(name))

    def __contains__(self, name) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def items(self):
        return list(self._items.items())


def caller_file(depth: int = 2) -> str:
    """The file of the code ``depth`` frames above this call (who registers)."""
    return str(Path(sys._getframe(depth).f_code.co_filename).resolve())


def source_file(obj) -> str:
    """The file that defines ``obj`` (a function or class): where a registration came from."""
    try:
        return inspect.getsourcefile(obj) or repr(obj)
    except TypeError:
        return repr(obj)


def _same_source(a: str, b: str) -> bool:
    """Whether two registrations come from the same file, or from files with one text."""
    if a == b:
        return True
    try:
        return Path(a).read_bytes() == Path(b).read_bytes()
    except OSError:
        return False


ENV_FAMILIES: Registry = Registry("environment family", "write --env <family>:<name> with "
                                                        "family")
POLICY_KINDS: Registry = Registry("policy kind", "pass --policy with")
RULES: Registry = Registry("update rule", "pass --algo with")
AGENT_SCHEMES: Registry = Registry("agent scheme", "pass --agent-update with")

__all__ = ["AGENT_SCHEMES", "ENV_FAMILIES", "POLICY_KINDS", "RULES", "Registry"]
