"""Plugins recorded by content: the copies a run directory keeps of the plugin files it trained
with, their sha256 and the packages they import, and the trust that importing them needs.

At train time every ``.py`` plugin is copied into ``<run>/plugins/`` and ``config.json``
lists it under ``"plugin_files"``: the name as given, the copy, its sha256, the versions of
the packages it imports, and a tag (``pgjax.core.trust``) saying that this user trained with this
content on this machine. A plugin given as a module name is recorded by name, with the
sha256 of its file; it is imported from the environment, not carried.

Reading a run back (``pgjax eval``/``render``, ``load_policy``, ``--resume``) imports the
run's copies, from any folder. Because importing runs code, a run's plugins are imported only
when they are trusted: their tags verify (this user trained them here), or the reader says
so (``--trust-plugins``, ``trust_plugins=True``). Otherwise one line names the files and
their hashes and nothing of them is imported. A file given with ``--plugins`` replaces the
run's copy of the same name; a file whose sha256 differs from the recorded one is refused
unless ``--allow-changed-plugins`` is given.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from pgjax.core.errors import ConfigError
from pgjax.core.registry import load_plugins
from pgjax.core.trust import sha256, tag, verify

FOLDER = "plugins"  # inside a run directory
KEY = "plugin_files"  # the entry of a run's config.json
PURPOSE = "plugin"  # what a plugin's tag vouches for


def _is_file(plugin: str) -> bool:
    return str(plugin).endswith(".py")


def _module_file(name: str) -> Path | None:
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    return Path(file) if file and file.endswith(".py") else None


def imported_packages(path) -> dict[str, str]:
    """{distribution: version} of the installed packages a plugin file imports (those that
    can be found; the standard library and local files have none)."""
    from importlib import metadata

    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return {}
    tops = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            tops.add(node.module.split(".")[0])
    owners = metadata.packages_distributions()
    out = {}
    for top in sorted(tops):
        for dist in owners.get(top, ()):
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                pass
    return out


def record(root, plugins) -> list[dict]:
    """Copy each plugin file of ``plugins`` into ``<root>/plugins/`` and return the
    ``"plugin_files"`` entries for the run's ``config.json``."""
    from pgjax.core.files import atomic_write_bytes

    entries, taken = [], set()
    for plugin in plugins:
        if not _is_file(plugin):
            file = _module_file(plugin)
            digest = sha256(file) if file is not None else None
            entries.append({"module": plugin, "sha256": digest,
                            "packages": imported_packages(file) if file else {},
                            "tag": tag(bytes.fromhex(digest), PURPOSE) if digest else None})
            continue
        source = Path(plugin)
        name, n = source.name, 1
        while name in taken:
            n += 1
            name = f"{source.stem}-{n}.py"
        taken.add(name)
        data = source.read_bytes()
        copy = Path(root) / FOLDER / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(copy, data)
        digest = sha256(copy)
        entries.append({"file": str(plugin), "copy": f"{FOLDER}/{name}", "sha256": digest,
                        "packages": imported_packages(copy),
                        "tag": tag(bytes.fromhex(digest), PURPOSE)})
    return entries


def _describe(path) -> str:
    """A file to import, with the sha256 of what it holds now."""
    return f"{path} (sha256 {sha256(path)[:16]})"


def recorded(root, record: dict, trust: bool = False, substitutes=(),
             allow_changed: bool = False, command: str = "pgjax eval") -> tuple[str, ...]:
    """Import the plugins run directory ``root`` trained with (its ``config.json`` as
    ``record``) and return them as ``TrainConfig.plugins`` should name them: the run's
    copies, or the files of ``substitutes`` (``--plugins``) that replace copies of the same
    file name. Refused with one line (nothing imported) when a plugin is missing, changed
    (unless ``allow_changed``) or not trusted (see the module docstring)."""
    root = Path(root)
    entries = record.get(KEY)
    given = tuple((record.get("config") or {}).get("plugins") or ())
    if not isinstance(given, tuple) or not all(isinstance(p, str) for p in given):
        raise ConfigError(f"{root / 'config.json'} is damaged (plugins {given!r}); restore it "
                          f"from a copy")
    if entries is None:  # written before plugins were recorded: only the paths as typed
        entries = [{"file": p} if _is_file(p) else {"module": p} for p in given]
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{root / 'config.json'} is damaged ({KEY}); restore it from a copy")
    substitutes = [str(s) for s in substitutes]
    by_name = {}
    for s in substitutes:
        key = Path(s).name if _is_file(s) else s
        names = [Path(e.get("file", "")).name if "file" in e else e.get("module")
                 for e in entries]
        if key not in names:
            raise ConfigError(f"--plugins {s} replaces none of the run's plugins "
                              f"({', '.join(map(str, names)) or 'it has none'}); pass a file "
                              f"with the same name as the one it replaces")
        by_name[key] = s
    paths, untrusted, notes = [], [], []
    for e in entries:
        if "module" in e:
            name = str(e["module"])
            sub = by_name.get(name)
            paths.append(sub or name)
            untrusted.append((e, name, True))
            continue
        name = Path(str(e.get("file", ""))).name
        sub = by_name.get(name)
        if sub is not None:
            path = Path(sub)
        elif e.get("copy"):
            path = root / str(e["copy"])
            if root.resolve() not in path.resolve().parents:
                raise ConfigError(f"{root / 'config.json'} is damaged (plugin copy {e['copy']!r} "
                                  f"lies outside the run directory); restore it from a copy")
        else:  # an old record: the path as typed, from where the run trained
            path = Path(str(e.get("file")))
        if not path.is_file():
            raise ConfigError(f"the plugin {e.get('file')} of {root} is not at {path}; pass the "
                              f"plugin file to {command} --plugins")
        digest = sha256(path)
        if e.get("sha256") and digest != e["sha256"] and not allow_changed:
            raise ConfigError(f"plugin {path} differs from the {name} {root} trained with "
                              f"(sha256 {digest[:16]} now, {str(e['sha256'])[:16]} recorded); "
                              f"pass the original to --plugins, or --allow-changed-plugins to "
                              f"use this one")
        if e.get("sha256") and digest != e["sha256"]:
            notes.append(f"plugin {path} differs from the one the run trained with (sha256 "
                         f"{digest[:16]}, recorded {str(e['sha256'])[:16]}); used as asked")
        ok = bool(e.get("sha256")) and digest == e["sha256"] and \
            verify(bytes.fromhex(digest), PURPOSE, e.get("tag"))
        untrusted.append((e, path, ok))
        paths.append(str(path.resolve()))
    if not trust:
        pending = [(e, p) for e, p, ok in untrusted if not ok]
        if pending:
            names = ", ".join(_describe(p) if not isinstance(p, str) else
                              f"module {p}" for e, p in pending)
            raise ConfigError(f"{root} carries plugin code that was not trained by you on "
                              f"this machine: {names}; nothing of it was imported. Read it, "
                              f"then pass --trust-plugins (trust_plugins=True in Python) to "
                              f"import it")
    for e, p, _ in untrusted:  # packages at other versions than at train time: a note
        if isinstance(p, Path):
            now = imported_packages(p)
            moved = [f"{k} {v} (trained with {e['packages'][k]})" for k, v in now.items()
                     if k in (e.get("packages") or {}) and e["packages"][k] != v]
            if moved:
                notes.append(f"plugin {p.name} imports {', '.join(moved)}")
    for note in notes:
        print(f"{command}: note: {note}", file=sys.stderr)
    load_plugins(paths)
    return tuple(paths)


def check_same(root, record: dict, plugins) -> None:
    """Before a resume: the plugins loaded now (``plugins``) have the content the run trained
    with; else one line naming the file."""
    entries = record.get(KEY)
    if not isinstance(entries, list):
        return  # recorded before plugins were: paths as typed were compared
    files = [Path(p) for p in plugins if _is_file(p)]
    want = [e for e in entries if isinstance(e, dict) and "copy" in e]
    if len(files) != len(want):
        raise ConfigError(f"cannot resume {root}: it trained with {len(want)} plugin file(s) "
                          f"({', '.join(Path(str(e.get('file'))).name for e in want) or 'none'}), "
                          f"{len(files)} given now; resume with the same --plugins")
    for e, f in zip(want, files):
        if not f.is_file() or sha256(f) != e.get("sha256"):
            raise ConfigError(f"cannot resume {root}: plugin {f} differs from the "
                              f"{Path(str(e.get('file'))).name} it trained with (its copy is "
                              f"{Path(root) / str(e.get('copy'))}); resume with that file")


__all__ = ["FOLDER", "KEY", "check_same", "imported_packages", "record", "recorded"]
