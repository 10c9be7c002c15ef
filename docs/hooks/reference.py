"""The reference pages of the documentation site, read from the code itself so they cannot
drift from it: every command's ``--help`` (its parser, called in-process), every option of
the typed training config with its type, default and docstring, every preset, the sweep-file
format and the record layout (module docstrings) and the exit codes.

``pages()`` returns ``{path under docs/: Markdown text}``; ``gen_pages.py`` writes them into
the site at build time, and ``tests/test_docs.py`` reads the same functions to check that
every option is documented. Nothing here imports MkDocs.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import html
import inspect
import io
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WIDTH = 100  # the terminal width the help texts are shown at

# the public modules with a page of their own: path -> (title, what it is for, objects)
API = {
    "reference/api/pgjax.md": (
        "pgjax", "The entry points: a typed config, `run` to train it, `load_policy` to act "
        "with what it trained.",
        ["pgjax.training.config.TrainConfig", "pgjax.loop.runner.run",
         "pgjax.tools.trained.load_policy"]),
    "reference/api/results.md": (
        "pgjax.analysis.results", "Reading records into tables: learning curves, final returns, "
        "aggregates with bootstrap confidence intervals.", ["pgjax.analysis.results"]),
    "reference/api/algos.md": (
        "pgjax.algos", "Update rules: registering one, and the pieces to build it from.",
        ["pgjax.algos.register", "pgjax.algos.Rule", "pgjax.algos.common.Algorithm",
         "pgjax.algos.common.AlgoConfig", "pgjax.algos.pieces"]),
    "reference/api/envs.md": (
        "pgjax.envs", "Environment families behind one pure, batched interface.",
        ["pgjax.envs"]),
    "reference/api/kinds.md": (
        "pgjax.training.kinds", "Policy kinds (feedforward, stateful, recurrent, window) and their "
        "settings.", ["pgjax.training.kinds"]),
    "reference/api/trained.md": (
        "pgjax.tools.trained", "Trained policies: loading, acting and evaluating them again.",
        ["pgjax.tools.trained"]),
    "reference/api/hparams.md": (
        "pgjax.core.hparams", "Hyperparameters as types: the field kinds a config declares and "
        "the typed record an update rule reads.", ["pgjax.core.hparams"]),
    "reference/api/nets.md": (
        "pgjax.model.nets", "Networks, and Parts, the record of an actor-critic's parameters.",
        ["pgjax.model.nets.Parts"]),
    "reference/api/evaluation.md": (
        "pgjax.core.evaluation", "Evaluation modes: names, keys, record columns and labels.",
        ["pgjax.core.evaluation"]),
    "reference/api/verdicts.md": (
        "pgjax.analysis.verdicts", "Verdicts on a comparison of two groups of runs.",
        ["pgjax.analysis.verdicts"]),
    "reference/api/plugin_files.md": (
        "pgjax.core.plugin_files", "The plugin files a run carries, and when they are imported.",
        ["pgjax.core.plugin_files"]),
}


# -- helpers -----------------------------------------------------------------------------
_CODE = r"``[^`]+``|:[a-z]+:`[^`]+`|`[^`]+`"
_EMPHASIS = r"(?<![\w*\\])\*[^\s*](?:[^*]*[^\s*])?\*(?![\w*])"


def _md_text(text: str, table: bool = False) -> str:
    """Plain or reStructuredText-flavoured prose as Markdown inline text: ````code````,
    ```code``` and ``:role:`code``` as code spans, ``*word*`` as emphasis, everything else
    escaped so that ``<name>``, a lone ``*`` or ``__init__`` stay what they are; with
    ``table``, ``|`` too (a table cell; a code span keeps its own)."""
    out = []
    for part in re.split(f"({_CODE}|{_EMPHASIS})", text):
        if re.fullmatch(_CODE, part):
            code = re.sub(r"^:[a-z]+:", "", part).strip("`")
            out.append(f"`` {code} ``" if "`" in code else f"`{code}`")
        elif re.fullmatch(_EMPHASIS, part):
            out.append("*" + html.escape(part[1:-1], quote=False) + "*")
        else:
            part = html.escape(part, quote=False)
            out.append(re.sub(r"([\\*_\[\]#|])" if table else r"([\\*_\[\]#])", r"\\\1",
                              part))
    return "".join(out)


def _paragraphs(doc: str) -> str:
    """A docstring's paragraphs, each joined to one line of Markdown text (a table cell)."""
    paragraphs = re.split(r"\n\s*\n", inspect.cleandoc(doc or ""))
    return "<br><br>".join(_md_text(re.sub(r"\s*\n\s*", " ", p), table=True)
                           for p in paragraphs if p)


def _language(block: list[str], code: str) -> str:
    if code != "auto":
        return code
    try:
        ast.parse("\n".join(block))
    except SyntaxError:
        return "text"
    return "python"


def docstring_markdown(doc: str, code: str = "auto") -> str:
    """A docstring (plain text with reStructuredText's inline literals and ``::`` blocks,
    as pgjax writes them) as Markdown: each indented block after a blank line a fenced code
    block (language ``code``; ``auto``: python where it parses as Python, else text), a
    paragraph's closing ``::`` a colon, the prose escaped by ``_md_text``."""
    lines = inspect.cleandoc(doc or "").splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("    ") and (not out or not out[-1].strip()):
            block = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                block.append(lines[i][4:])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            language = _language(block, code)
            if language == "text":
                block = [re.sub(_CODE, lambda m: re.sub(r"^:[a-z]+:", "", m.group())
                                .strip("`"), x) for x in block]
            out += [f"```{language}", *block, "```", ""]
            continue
        line = re.sub(r"\s*::$", ":", line)
        bullet = re.match(r"^(\s*(?:[-*] |\d+\. ))", line)
        lead = bullet.group(1) if bullet else re.match(r"^\s*", line).group()
        out.append(lead + _md_text(line[len(lead):]))
        i += 1
    return "\n".join(out).rstrip() + "\n"


def _capture(fn, *args) -> str:
    """What ``fn(*args)`` prints, at a terminal width of ``WIDTH``; help ends in SystemExit."""
    buf = io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                fn(*args)
            except SystemExit:
                pass
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()).strip("\n")


# -- the command line --------------------------------------------------------------------
def commands() -> dict:
    """``pgjax``'s commands: name -> the function that runs it."""
    from pgjax.cli import COMMANDS

    return dict(COMMANDS)


def command_help(name: str | None) -> str:
    """``pgjax <name> --help`` (``pgjax --help`` for None), as the terminal shows it."""
    from pgjax.cli import main

    return _capture(main, ["--help"] if name is None else [name, "--help"])


class _Built(Exception):
    def __init__(self, parser):
        self.parser = parser


def parsers() -> dict[str, argparse.ArgumentParser]:
    """The argparse parser of every command but ``train`` (whose options are the typed
    config's, parsed by tyro), as each command builds it: the command is called with
    ``parse_args`` stopped before it parses anything."""
    from pgjax import cli

    found = {}
    original = cli.ArgumentParser.parse_args

    def stop(self, args=None, namespace=None):
        raise _Built(self)

    cli.ArgumentParser.parse_args = stop
    try:
        for name, run in commands().items():
            if name == "train":
                continue
            try:
                run([])
            except _Built as built:
                found[name] = built.parser
            else:
                raise RuntimeError(f"pgjax {name} parses its arguments without "
                                   f"pgjax.cli.ArgumentParser")
    finally:
        cli.ArgumentParser.parse_args = original
    return found


def parser_options(parser: argparse.ArgumentParser) -> list[dict]:
    """Every argument of ``parser`` but ``--help``: its flags (or name), metavar, default
    and help text."""
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        rows.append({"flags": list(action.option_strings) or [action.metavar or action.dest],
                     "dest": action.dest, "help": action.help or "",
                     "default": None if action.default in (None, argparse.SUPPRESS, False, [])
                     or not action.option_strings else action.default,
                     "choices": action.choices})
    return rows


# -- the typed config --------------------------------------------------------------------
def train_config() -> type:
    """``TrainConfig`` with a sub-config for every component registered without plugins
    (what ``pgjax train --help`` shows)."""
    from pgjax.training.config import TrainConfig, config_class

    return config_class(TrainConfig, ())


def field_docs(cls: type) -> dict[str, str]:
    """The docstring of every field of dataclass ``cls`` (its bases' too), dedented."""
    docs: dict[str, str] = {}
    for owner in reversed(cls.__mro__):
        if owner.__module__ == "builtins" or not dataclasses.is_dataclass(owner):
            continue
        try:
            source = inspect.getsource(owner)
        except (OSError, TypeError):
            continue
        tree = ast.parse(inspect.cleandoc("\n" + source) if source[:1].isspace() else source)
        body = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)).body
        for prev, node in zip(body, body[1:]):
            if (isinstance(prev, ast.AnnAssign) and isinstance(prev.target, ast.Name)
                    and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                docs[prev.target.id] = inspect.cleandoc(node.value.value)
    return docs


def _suppressed(field: dataclasses.Field) -> bool:
    """Whether tyro leaves ``field`` off the command line (``tyro.conf.Suppress``)."""
    return "Suppress" in str(field.type)


def _type_name(field: dataclasses.Field) -> str:
    t = field.type if isinstance(field.type, str) else getattr(field.type, "__name__",
                                                                str(field.type))
    t = re.sub(r"^Annotated\[(.*), tyro\.conf\.\w+\]$", r"\1", t)
    return re.sub(r"\btyping\.", "", t)


def _flag(name: str, field: dataclasses.Field, default) -> str:
    from pgjax.training.options import flag

    if isinstance(default, bool):
        owner, _, last = name.rpartition(".")
        return f"{flag(name)}, {flag(f'{owner}.no_{last}' if owner else f'no_{last}')}"
    return flag(name)


def _class_summary(cls) -> str:
    """The first paragraph of a class's docstring: a sub-config's description where its
    field has none of its own (the components' sub-configs come from the registries)."""
    return inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0]


def config_sections() -> list[dict]:
    """The typed config as sections: the run's own options, then one per sub-config; each
    option with its flag, type, default and docstring."""
    from pgjax.training.options import sub_configs

    cls = train_config()
    subs = sub_configs(cls)
    top_docs = field_docs(cls)
    sections = [{"key": "", "title": "Run options", "class": cls,
                 "doc": inspect.cleandoc(cls.__doc__ or ""), "options": []}]
    for f in dataclasses.fields(cls):
        if f.name in subs:
            sections.append({"key": f.name, "title": f"`--{f.name.replace('_', '-')}.*`",
                             "class": subs[f.name], "doc": top_docs.get(f.name) or _class_summary(subs[f.name]),
                             "options": []})
    for section in sections:
        owner = section["class"]
        docs = field_docs(owner)
        default_of = owner()
        for f in dataclasses.fields(owner):
            if section["key"] == "" and f.name in subs:
                continue
            name = f"{section['key']}.{f.name}" if section["key"] else f.name
            default = getattr(default_of, f.name)
            section["options"].append({
                "name": name, "field": f.name, "type": _type_name(f), "default": default,
                "doc": docs.get(f.name, ""), "python_only": _suppressed(f),
                "flag": None if _suppressed(f) else _flag(name, f, default)})
    return sections


# -- the pages ---------------------------------------------------------------------------
GENERATED = ("<!-- generated from the code by docs/hooks/reference.py when the site is "
             "built: edit the code's docstrings, not this page -->\n\n")


def cli_page() -> str:
    out = [GENERATED, "# Command line\n",
           "Every `pgjax` command's `--help`, as a terminal shows it (generated from the "
           "parsers themselves when this site is built). The options of `pgjax train` are "
           "the fields of the typed config: [Configuration](config.md) lists each with its "
           "type, default and meaning, and [Presets](presets.md) the named bundles of "
           "them.\n",
           "## pgjax\n", "```text", command_help(None), "```\n"]
    for name in commands():
        out += [f"## pgjax {name}\n", "```text", command_help(name), "```\n"]
    return "\n".join(out)


def _default(value) -> str:
    if isinstance(value, tuple):
        value = list(value)
    text = repr(value)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def config_page() -> str:
    from pgjax.core.hparams import traced_fields

    out = [GENERATED, "# Configuration\n",
           "`pgjax train`'s options are the fields of a typed config, "
           "`pgjax.TrainConfig`: the run's own settings and one sub-config per component "
           "(update rule, policy kind, environment family, agents). A flag, a sweep-file key, "
           "a preset's setting and the Python name are spelled alike: `--ppo.clip-eps 0.1` "
           "on the command line, `\"ppo.clip_eps\" = 0.1` in a sweep file, "
           "`TrainConfig(ppo=PPOConfig(clip_eps=0.1))` in Python. A boolean option `--x` "
           "is turned off with `--no-x` (`--ppo.no-norm-adv`). Options marked *traced* are "
           "traced hyperparameters: `--grid` sweeps them inside one compiled program.\n",
           "A run reads only the sub-configs of the components it uses (its update rule, "
           "policy kind, environment family and, for multi-agent training, `agents`); "
           "setting another's options is refused.\n"]
    for section in config_sections():
        cls = section["class"]
        traced = set(traced_fields(cls)) if dataclasses.is_dataclass(cls) else set()
        out.append(f"## {section['title']} {{#{section['key'] or 'run'}}}\n")
        where = f"`{cls.__module__}.{cls.__qualname__}`"
        if section["doc"]:
            out.append(f"{_paragraphs(section['doc'])} ({where})\n")
        else:
            out.append(f"{where}\n")
        out += ["| option | type | default | meaning |", "| --- | --- | --- | --- |"]
        for o in section["options"]:
            flag = (f"`{o['flag']}`" if o["flag"] else
                    f"`{o['field']}` (Python only)")
            kind = o["type"] + (", traced" if o["field"] in traced else "")
            out.append(f"| {flag} | {_md_text(kind, True)} | {_default(o['default'])} | "
                       f"{_paragraphs(o['doc'])} |")
        out.append("")
    return "\n".join(out)


def presets_page() -> str:
    from pgjax.training.presets import PRESETS

    out = [GENERATED, "# Presets\n",
           _md_text(_first_paragraph(sys.modules["pgjax.training.presets"].__doc__)) + "\n",
           "`pgjax train --preset NAME` applies one before the command-line flags, so every "
           "explicit flag overrides it; a sweep file takes `preset = \"NAME\"`; "
           "`TrainConfig.from_preset(NAME, env=...)` is the Python form; `pgjax presets "
           "NAME` prints the same as this page. Each preset says where its values come "
           "from and what pgjax does differently.\n",
           "| preset | what it is |", "| --- | --- |"]
    out += [f"| [`{p.name}`](#{p.name}) | {_md_text(p.summary, True)} |" for p in PRESETS.values()]
    out.append("")
    for p in PRESETS.values():
        out += [f"## {p.name} {{#{p.name}}}\n", _md_text(p.summary) + "\n",
                f"**Source:** {_md_text(p.source)}\n",
                "| option | value |", "| --- | --- |"]
        out += [f"| `{k}` | {_default(v)} |" for k, v in p.options.items()]
        out.append("")
        if p.per_task:
            out += ["Per task (the part of the environment id after the family, e.g. "
                    "`hopper` for `gym:Hopper-v5`):\n", "| task | options |", "| --- | --- |"]
            out += [f"| `{task}` | " + ", ".join(f"`{k}` = {_default(v)}" for k, v in
                                                 opts.items()) + " |"
                    for task, opts in p.per_task.items()]
            out.append("")
        if p.lines:
            out += ["Where the values are in the source:\n", "| option | source line |",
                    "| --- | --- |"]
            out += [f"| `{k}` | {_md_text(v, True)} |" for k, v in p.lines.items()]
            out.append("")
        if p.deviations:
            out.append("Differs from the source:\n")
            out += [f"- {_md_text(d)}" for d in p.deviations]
            out.append("")
    return "\n".join(out)


def _first_paragraph(doc: str) -> str:
    return re.sub(r"\s*\n\s*", " ", inspect.cleandoc(doc).split("\n\n")[0])


def sweep_page() -> str:
    from pgjax.tools import sweep

    body = docstring_markdown(sweep.__doc__, code="toml")
    title, _, rest = body.partition("\n")
    return (GENERATED + "# Sweep files\n\n" + title + "\n" + rest +
            "\nThe top-level keys a sweep file may hold: " +
            ", ".join(f"`{k}`" for k in sorted(sweep.TOP_KEYS)) + ". Any `pgjax train` "
            "option can go in `[config]`, `[env_config.\"<env>\"]` and `[static]` "
            "(see [Configuration](config.md)); traced hyperparameters in `[grid]`.\n")


def records_page() -> str:
    from pgjax.loop import records

    return GENERATED + "# Records\n\n" + docstring_markdown(records.__doc__, code="text")


# the codes pgjax.cli returns as literals
OTHER_EXIT_CODES = {
    0: "done",
    1: "the command could not finish: its output's reader closed it first (records are "
       "kept), or an unexpected error (a Python traceback)",
    130: "interrupted by Ctrl-C: finished chunks are recorded (continue a run with "
         "`--resume`, a sweep by running it again)",
}


def exit_codes() -> list[tuple[int, str, str]]:
    """``(code, name, meaning)`` for every ``EXIT_*`` constant of ``pgjax.core.errors``, the
    meaning from the comment on its line."""
    from pgjax.core import errors

    rows = []
    for line in inspect.getsource(errors).splitlines():
        m = re.match(r"(EXIT_\w+)\s*=\s*(\d+)\s*#\s*(.*)", line)
        if m:
            rows.append((int(m.group(2)), m.group(1), m.group(3)))
    return rows


def exit_codes_page() -> str:
    from pgjax.cli import USAGE

    usage = USAGE.split("\n\n")
    said = next(p for p in usage if p.startswith("exit codes:"))
    rows = [(code, f"`pgjax.core.errors.{name}`", _md_text(meaning, True))
            for code, name, meaning in exit_codes()]
    rows += [(code, "", meaning) for code, meaning in OTHER_EXIT_CODES.items()
             if code not in {r[0] for r in rows}]
    out = [GENERATED, "# Exit codes\n",
           "What `pgjax --help` says:\n", "```text", said.strip(), "```\n",
           "Every code, with the constant in `pgjax.core.errors` where there is one:\n",
           "| code | constant | meaning |", "| --- | --- | --- |"]
    out += [f"| {code} | {name} | {meaning} |" for code, name, meaning in sorted(rows)]
    out += ["",
            "An error a command refuses is one line on stderr, `pgjax <command>: error: ...`, "
            "that names the problem and the fix. A plugin's own code failing while a run is "
            "built is refused the same way (exit 2), naming the plugin's file and line.\n"]
    return "\n".join(out)


def api_page(path: str) -> str:
    title, about, objects = API[path]
    out = [GENERATED, f"# {title}\n", about + "\n"]
    for obj in objects:
        out.append(f"::: {obj}\n")
    return "\n".join(out)


def index_page() -> str:
    out = [GENERATED, "# Reference\n",
           "Generated from the code when this site is built, so it says what the installed "
           "version does.\n",
           "- [Command line](cli.md): every command's `--help` "
           "(" + ", ".join(f"`pgjax {n}`" for n in commands()) + ")",
           "- [Configuration](config.md): every `pgjax train` option, with its type, default "
           "and meaning",
           "- [Presets](presets.md): the named bundles of a source's settings, with their "
           "sources",
           "- [Sweep files](sweep-files.md): the TOML format of `pgjax sweep`",
           "- [Records](records.md): what a run directory holds",
           "- [Exit codes](exit-codes.md)",
           "- Python API: " + ", ".join(f"[{t}]({p.removeprefix('reference/')})"
                                        for p, (t, _, _) in API.items()),
           "- [Writing these docs](../contributing-docs.md): how examples in the pages are "
           "marked and tested",
           ""]
    return "\n".join(out)


def pages() -> dict[str, str]:
    """Every generated reference page: path under docs/ -> Markdown."""
    out = {"reference/index.md": index_page(), "reference/cli.md": cli_page(),
           "reference/config.md": config_page(), "reference/presets.md": presets_page(),
           "reference/sweep-files.md": sweep_page(), "reference/records.md": records_page(),
           "reference/exit-codes.md": exit_codes_page()}
    out.update({path: api_page(path) for path in API})
    return out


__all__ = ["API", "command_help", "commands", "config_sections", "field_docs", "pages",
           "docstring_markdown", "parser_options", "parsers", "train_config"]
