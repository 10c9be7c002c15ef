"""The documentation site: it builds with every warning an error, its reference pages hold
every option, every option has text of its own, and every code example is either run here or
says why not.

Examples (``docs/contributing-docs.md`` says the same for authors): a fenced block in
``docs/**/*.md`` or ``README.md`` whose language is python, bash, sh, shell or console has,
on the line just before its opening fence, either ``<!-- run -->`` (this test runs it: bash,
sh and shell blocks with ``bash -e``, console blocks' ``$ `` lines likewise, python blocks
with this Python; each in a fresh temporary working directory, with this environment's
``bin/`` first on PATH and the repository in ``$PGJAX_REPO``, within ``RUN_TIMEOUT``
seconds) or ``<!-- not run: REASON -->`` with a reason. An unmarked block fails, named by
its file and line.
"""
from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LANGUAGES = ("python", "bash", "sh", "shell", "console")
RUN_TIMEOUT = 300  # seconds for one <!-- run --> block (on a loaded CI machine; aim for seconds)
RUN = re.compile(r"<!--\s*run\s*-->")
NOT_RUN = re.compile(r"<!--\s*not run:(.*?)-->")


def _reference():
    """docs/hooks/reference.py, the generator of the reference pages (it imports no MkDocs)."""
    spec = importlib.util.spec_from_file_location("pgjax_docs_reference",
                                                  REPO / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = _reference()


# -- (a) the site builds, and its reference pages hold every option ---------------------
@pytest.fixture(scope="module")
def site(tmp_path_factory):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocs_gen_files", "mkdocs_jupyter"):
        pytest.importorskip(module, reason="the docs extra: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if k != "PGJAX_DOCS_STUBS"}
    env["NO_MKDOCS_2_WARNING"] = "1"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
         "-d", str(out)], cwd=tmp_path_factory.mktemp("cwd"), env=env, capture_output=True,
        text=True, timeout=900)
    warnings = [x for x in built.stderr.splitlines() if x.startswith(("WARNING", "ERROR"))]
    assert built.returncode == 0, "mkdocs build --strict failed:\n" + (
        "\n".join(warnings) if warnings else built.stderr[-6000:])
    return out


def _text(page: Path) -> str:
    """The visible text of a built page, whitespace collapsed, entities decoded."""
    import html

    body = page.read_text(encoding="utf-8")
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", body, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", body)))


@pytest.mark.slow
def test_the_site_builds_with_every_page(site):
    for page in ["index.html", "changelog.html", "contributing-docs.html",
                 *(p.replace(".md", ".html") for p in reference.pages()),
                 *(f"tutorials/{nb.stem}.html" for nb in (REPO / "notebooks").glob("*.ipynb"))]:
        assert (site / page).is_file(), f"{page} is missing from the built site"
    # offline: the search index as a script (a file:// page cannot fetch the JSON) and pages
    # linked as files
    assert (site / "search" / "search_index.js").read_text().startswith("var __index")
    assert 'href="reference/cli.html"' in (site / "index.html").read_text()
    # no script from elsewhere: search runs in the site's own frame worker under file://
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert not re.search(r'<script[^>]+src="(https?:)?//', text), page
    assert "frame-worker.js" in (site / "reference" / "cli.html").read_text()
    for notebook in (REPO / "notebooks").glob("*.ipynb"):  # rendered, with their cells
        import json

        cells = json.loads(notebook.read_text())["cells"]
        first = "".join(cells[0]["source"]).lstrip("# ").splitlines()[0]
        assert first in _text(site / "tutorials" / f"{notebook.stem}.html"), notebook.name


@pytest.mark.slow
def test_the_reference_pages_hold_every_option_and_preset(site):
    cli = _text(site / "reference" / "cli.html")
    config = _text(site / "reference" / "config.html")
    for section in reference.config_sections():
        for option in section["options"]:
            if option["flag"] is None:
                continue
            for flag in option["flag"].split(", "):
                assert flag in cli, f"pgjax train {flag} is not on the command-line page"
                assert flag in config, f"pgjax train {flag} is not on the configuration page"
    for command, parser in _parsers().items():
        for option in reference.parser_options(parser):
            for flag in option["flags"]:
                assert flag in cli, f"pgjax {command} {flag} is not on the command-line page"
    presets = _text(site / "reference" / "presets.html")
    from pgjax.training.presets import PRESETS

    for preset in PRESETS.values():
        assert preset.name in presets and preset.source in presets, preset.name
        for key in preset.options:
            assert key in presets, f"{preset.name}: {key}"
    sweep = _text(site / "reference" / "sweep-files.html")
    assert "[grid]" in sweep and "[static]" in sweep and "env_config" in sweep
    from pgjax.core import errors

    codes = _text(site / "reference" / "exit-codes.html")
    for name in dir(errors):
        if name.startswith("EXIT_"):
            assert name in codes and str(getattr(errors, name)) in codes
    records = _text(site / "reference" / "records.html")
    assert "metrics.csv" in records and "status.json" in records
    api = _text(site / "reference" / "api" / "pgjax.html")
    assert "pgjax.training.config.TrainConfig" in api and "load_policy" in api


# -- (b) every option has text of its own ------------------------------------------------
@functools.lru_cache(maxsize=None)
def _parsers():
    return reference.parsers()


def _commands() -> list[str]:
    from pgjax.cli import COMMANDS

    return [c for c in COMMANDS if c != "train"]


@pytest.mark.parametrize("command", _commands())
def test_every_option_of_a_command_has_help(command):
    parser = _parsers()[command]
    assert parser.description, f"pgjax {command} has no description"
    missing = [o["flags"][0] for o in reference.parser_options(parser)
               if not o["help"].strip()]
    assert not missing, f"pgjax {command}: options without help text: {missing}"
    text = reference.command_help(command)
    assert f"usage: pgjax {command}" in text
    assert "``" not in text and not re.search(r"::$|:[a-z]+:`", text, re.M), text


def test_every_config_field_has_a_docstring():
    missing = [f"{s['key'] or 'TrainConfig'}: {o['name']}"
               for s in reference.config_sections() for o in s["options"]
               if not o["doc"].strip()]
    assert not missing, f"config fields without a docstring: {missing}"
    subs = [s["key"] for s in reference.config_sections()[1:] if not s["doc"].strip()]
    assert not subs, f"sub-configs without a docstring on their TrainConfig field: {subs}"


def test_the_options_of_the_example_plugins_are_documented():
    """The components examples/*.py register (an update rule, a policy kind, ...) add
    sub-configs to ``pgjax train --plugins FILE``; each of their fields has a docstring. In
    a process of its own, so that the registrations do not outlive the test."""
    check = f"""
import dataclasses, glob, importlib.util, sys
spec = importlib.util.spec_from_file_location("reference", {str(REPO / "docs/hooks/reference.py")!r})
reference = importlib.util.module_from_spec(spec); spec.loader.exec_module(reference)
from pgjax.training.config import TrainConfig, config_class
from pgjax.training.options import sub_configs
base = set(sub_configs(config_class(TrainConfig, ())))
plugins = tuple(sorted(glob.glob({str(REPO / "examples" / "*.py")!r})))
added = {{k: v for k, v in sub_configs(config_class(TrainConfig, plugins)).items() if k not in base}}
missing = [f"{{k}}.{{f.name}}" for k, sub in added.items() for f in dataclasses.fields(sub)
           if not reference.field_docs(sub).get(f.name, "").strip()]
print("added:", sorted(added))
sys.exit(f"fields without a docstring: {{missing}}" if missing else 0)
"""
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "added: [" in done.stdout and "added: []" not in done.stdout, done.stdout


def test_every_preset_says_what_it_is_and_where_it_comes_from():
    from pgjax.training.presets import PRESETS

    for p in PRESETS.values():
        assert p.summary.strip() and p.source.strip() and p.options, p.name
        assert all(isinstance(d, str) and d.strip() for d in p.deviations), p.name


def test_train_help_shows_every_option_in_plain_wrapped_text():
    """``pgjax train --help`` lists every option with its docstring's text, as plain text
    (no reStructuredText markup), each paragraph wrapped to the terminal's width rather than
    broken where the docstring's lines break."""
    text = reference.command_help("train")
    assert "``" not in text and not re.search(r"::$|:[a-z]+:`", text, re.M), text
    flat = re.sub(r"\s+", " ", text)
    from pgjax.cli import plain

    for section in reference.config_sections():
        for option in section["options"]:
            if option["flag"] is None:
                continue
            assert option["flag"].split(", ")[0] in flat, option["name"]
            words = re.sub(r"\s+", " ", plain(option["doc"])).strip()
            assert words in flat, f"{option['name']}: its docstring is not in the help"
    # a line of an option's help that is followed by more of it is filled to the width
    # (tyro wraps each paragraph; a line broken short is a docstring's own line break)
    lines = text.splitlines()
    column = re.compile(r"^ {20,}\S")
    short = [a for a, b in zip(lines, lines[1:])
             if column.match(a) and column.match(b) and len(a.rstrip()) < reference.WIDTH * 0.6]
    assert not short, "help lines broken short:\n" + "\n".join(short)


# -- (c) every example is run, or says why not -------------------------------------------
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*\{?\.?([\w+-]*)")


def code_blocks(path: Path):
    """``(line, language, code, marker line)`` for every fenced block of ``path``: the line
    of its opening fence (1-based), its language, its text and the line before the fence."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, language = m.group(1), m.group(2), m.group(3).lower()
        close = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        body = [x[len(indent):] if x.startswith(indent) else x.lstrip() for x in lines[i + 1:j]]
        yield i + 1, language, "\n".join(body) + "\n", lines[i - 1].strip() if i else ""
        i = j + 1


def _example_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _examples():
    out = []
    for path in _example_files():
        if not path.is_file():
            continue
        for line, language, code, before in code_blocks(path):
            if language in LANGUAGES:
                where = f"{path.relative_to(REPO)}:{line}"
                # running an example trains: the full suite's; checking its marker is fast
                marks = [pytest.mark.slow] if RUN.fullmatch(before) else []
                out.append(pytest.param(where, language, code, before, id=where, marks=marks))
    return out


@pytest.mark.parametrize("where, language, code, before", _examples())
def test_example(where, language, code, before, tmp_path):
    not_run = NOT_RUN.fullmatch(before)
    if not_run:
        assert not_run.group(1).strip(), (
            f"{where}: <!-- not run: REASON --> needs its reason")
        return
    assert RUN.fullmatch(before), (
        f"{where}: a {language} block needs <!-- run --> (the test runs it) or "
        f"<!-- not run: REASON --> on the line just before its fence")
    env = {**os.environ, "PGJAX_REPO": str(REPO),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if language == "python":
        script = tmp_path / "example.py"
        script.write_text(code)
        command = [sys.executable, str(script)]
    else:
        if language == "console":
            code = "\n".join(x[2:] for x in code.splitlines() if x.startswith("$ ")) + "\n"
        script = tmp_path / "example.sh"
        script.write_text(code)
        command = ["bash", "-e", str(script)]
    work = tmp_path / "work"
    work.mkdir()
    try:
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where}: the example ran past {RUN_TIMEOUT} s; make it smaller, or mark "
                    f"it <!-- not run: REASON -->")
    assert done.returncode == 0, (
        f"{where}: the example exited {done.returncode}\n--- code\n{code}--- stdout\n"
        f"{done.stdout[-3000:]}--- stderr\n{done.stderr[-3000:]}")


def test_the_marker_convention_finds_blocks_and_markers(tmp_path):
    """The parser behind test_example: nested and indented fences, and the markers."""
    page = tmp_path / "page.md"
    page.write_text(inspect.cleandoc('''
        Text.

        <!-- run -->
        ```bash
        echo one
        ```

        ````markdown
        <!-- not run: shown -->
        ```python
        inside a markdown block: not a block of its own
        ```
        ````

        - a list item:

            <!-- not run: needs a GPU -->
            ```console
            $ pgjax train
            ```

        ```toml
        x = 1
        ```
        '''))
    blocks = list(code_blocks(page))
    assert [(b[0], b[1]) for b in blocks] == [(4, "bash"), (8, "markdown"), (18, "console"),
                                              (22, "toml")]
    assert RUN.fullmatch(blocks[0][3]) and blocks[0][2] == "echo one\n"
    assert NOT_RUN.fullmatch(blocks[2][3]).group(1).strip() == "needs a GPU"
    assert blocks[2][2] == "$ pgjax train\n"
