"""The registries of pgjax's four component kinds (env families, policy kinds, update rules,
agent schemes): name -> component, each with the file that registered it.

Built-in components register themselves here exactly as a plugin does (``--plugins``), and
everything that turns a name into a component (the config, the trainer, eval, render,
load_policy, help texts, presets) asks these registries, so no module outside a component
matches its name.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Generic, Iterator, TypeVar

from pgjax.core.errors import ConfigError

T = TypeVar("T")

LOADED_PLUGINS: list[str] = []  # the plugins this process has imported, in order


class Registry(Generic[T]):
    """Components of one kind by name; ``get`` refuses an unknown name with one line that
    lists the registered ones and says where to pass the name."""

    def __init__(self, kind: str, where: str):
        self.kind, self.where = kind, where
        self._items: dict[str, T] = {}
        self._origins: dict[str, str] = {}
        self._removed: dict[str, tuple] = {}
        self._texts: dict[str, tuple] = {}  # (origin, its text when it registered)

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
        known = self._texts.get(name, (None, None))  # the text its origin had, if the same
        text = known[1] if known[0] == self._origins.get(name) else None
        if name in self._items and not replace and not _same_source(self._origins[name],
                                                                    origin, text):
            raise ValueError(f"{self.kind} '{name}' is registered twice: by "
                             f"{self._origins[name]} and by {origin}; rename one of them (or "
                             f"pass replace=True)")
        self._items[name], self._origins[name] = component, origin
        self._texts[name] = (origin, _text(origin))
        return component

    def get(self, name: str, *default) -> T:
        """The component ``name``; ``default`` (when given) for an unknown name, else a
        ``ConfigError``."""
        if name not in self._items and default:
            return default[0]
        if name not in self._items:
            from pgjax.core.errors import did_you_mean

            raise ConfigError(f"unknown {self.kind} '{name}'{did_you_mean(name, self._items)}; "
                              f"{self.where} one of "
                              f"{', '.join(self._items)} (or register one from --plugins)")
        return self._items[name]

    def origin(self, name: str) -> str:
        """The file that registered ``name``."""
        return self._origins[name]

    def builtin(self, name: str) -> bool:
        """Whether ``name`` was registered by pgjax itself (not by a plugin)."""
        return Path(__file__).parents[1] in Path(self._origins.get(name, "/")).parents

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


def _text(path: str) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except OSError:
        return None


def _same_source(a: str, b: str, text_a: bytes | None = None) -> bool:
    """Whether two registrations come from the same file, or from files with one text (a
    run's copy of a plugin and the plugin; ``text_a``: ``a``'s text when it registered, as
    ``a`` may be gone since)."""
    if a == b:
        return True
    text_a = text_a if text_a is not None else _text(a)
    return text_a is not None and text_a == _text(b)


ENV_FAMILIES: Registry = Registry("environment family", "write --env <family>:<name> with "
                                                        "family")
POLICY_KINDS: Registry = Registry("policy kind", "pass --policy with")
RULES: Registry = Registry("update rule", "pass --algo with")
AGENT_SCHEMES: Registry = Registry("agent scheme", "pass --agent-update with")

__all__ = ["AGENT_SCHEMES", "ENV_FAMILIES", "POLICY_KINDS", "RULES", "Registry"]


def _imported_from(path: Path) -> bool:
    """Whether a module already imported (``import my_plugin``) was loaded from ``path``."""
    target = path.resolve()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and file.endswith(".py") and Path(file).resolve() == target:
            return True
    return False


def load_plugins(plugins) -> None:
    """Import each plugin (a dotted module name or a path to a .py file, whose folder joins
    ``sys.path`` so it can import the files beside it) once; plugins register update rules
    with ``pgjax.algos.register`` and the other registries. ``LOADED_PLUGINS`` lists them in
    order, so a worker process can load the same ones."""
    if isinstance(plugins, (str, bytes)) or not all(isinstance(p, str) for p in plugins):
        raise ConfigError(f"plugins must be a list of .py files or module names, got "
                          f"{plugins!r}; write plugins = [{str(plugins)!r}]"
                          if isinstance(plugins, str) else
                          f"plugins must be a list of .py files or module names, got "
                          f"{plugins!r}; write plugins = [\"my_plugin.py\"]")
    for plugin in plugins:
        key = f"pgjax_plugin:{Path(plugin).resolve()}" if plugin.endswith(".py") else plugin
        if key in sys.modules or (plugin.endswith(".py") and _imported_from(Path(plugin))):
            continue  # one module per plugin, however it was imported first
        try:
            if plugin.endswith(".py"):
                # named by its key, so inspect (help texts) finds the module of its classes
                spec = importlib.util.spec_from_file_location(key, plugin)
                if spec is None or not Path(plugin).exists():
                    raise ImportError(f"no file {plugin}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[key] = module
                folder = str(Path(plugin).resolve().parent)  # a plugin imports files beside it
                if folder not in sys.path:
                    sys.path.insert(0, folder)
                spec.loader.exec_module(module)
            else:
                sys.modules[key] = importlib.import_module(plugin)
            LOADED_PLUGINS.append(str(Path(plugin).resolve()) if plugin.endswith(".py")
                                  else plugin)
        except ImportError as e:
            sys.modules.pop(key, None)
            missing = getattr(e, "name", None)
            inside = Path(plugin).exists() if plugin.endswith(".py") else \
                missing is not None and not (plugin + ".").startswith(missing + ".")
            if inside:  # the plugin was found; something it imports is not installed
                import traceback

                frame = traceback.extract_tb(e.__traceback__)[-1]
                where = next((f for f in reversed(traceback.extract_tb(e.__traceback__))
                              if "importlib" not in f.filename), frame)
                raise ConfigError(f"plugin '{plugin}' cannot import {missing or 'a module'} "
                                  f"({e}; at {where.filename}:{where.lineno}); install it "
                                  f"(pip install {missing or '...'}) or fix the plugin's "
                                  f"import") from None
            raise ConfigError(f"cannot import plugin '{plugin}' ({e}); pass an importable "
                              f"module name or the path of a .py file to --plugins") from None
        except Exception as e:  # the plugin's own code failed: say where, in one line
            sys.modules.pop(key, None)
            import traceback

            if isinstance(e, SyntaxError):  # the file and line, not importlib's frame
                where = Path(e.filename).resolve() if e.filename else plugin
                raise ConfigError(f"plugin '{plugin}' does not parse: {type(e).__name__} at {where}:"
                                  f"{e.lineno}: {e.msg}; fix the plugin, or pass --plugins "
                                  f"without it") from None
            frames = traceback.extract_tb(e.__traceback__)
            frame = next((f for f in reversed(frames) if not f.filename.startswith("<frozen")),
                         frames[-1])
            raise ConfigError(f"plugin '{plugin}' raised {type(e).__name__}: {e} (at "
                              f"{frame.filename}:{frame.lineno}); fix the plugin, or pass "
                              f"--plugins without it") from None


def plugin_loaded(plugin: str) -> bool:
    """Whether ``plugin`` (as ``load_plugins`` takes it) is imported in this process."""
    if str(plugin).endswith(".py"):
        return f"pgjax_plugin:{Path(plugin).resolve()}" in sys.modules or \
            _imported_from(Path(plugin))
    return plugin in sys.modules


def plugin_frame(error: BaseException):
    """The innermost frame of ``error``'s traceback that lies in a loaded plugin's file (a
    ``traceback.FrameSummary``), or None when no plugin code raised it."""
    import traceback

    files = {str(Path(p).resolve()) for p in LOADED_PLUGINS if p.endswith(".py")}
    files |= {str(Path(m.__file__).resolve()) for name, m in list(sys.modules.items())
              if name in LOADED_PLUGINS and getattr(m, "__file__", None)}
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if str(Path(frame.filename).resolve()) in files:
            return frame
    return None
