"""Messages that lead somewhere: for bad input to `pgjax train`, `sweep`, `eval`, `plot` and
`render`, the one-line error says how to fix it, and doing literally what it says (pass this
flag, write this line in the sweep file, use the option it probably meant) gives input that
is then accepted. Each fix is read from the printed message, never written into the test;
nothing compiles (the step that would is replaced by one that reports the input accepted)."""
from __future__ import annotations

import json
import re
import tomllib

import pandas as pd
import pytest

import pgjax.tools.plotting
import pgjax.tools.render
import pgjax.loop.runner
import pgjax.tools.trained
from pgjax.cli import main


class Accepted(Exception):
    """Raised where a command would start compiling or reading runs: its input was valid."""


def _accept(*args, **kwargs):
    raise Accepted


# words that end a flag's values in a message ("pass --checkpoint-seconds 0 to save ...")
STOP = {"with", "in", "to", "or", "and", "for", "ending", "as", "instead", "from", "of", "the",
        "a", "an", "it", "now", "only", "sizes", "without"}
FLAG = r"--[a-z][\w.-]*"


def _quoted_before(message: str, pos: int) -> str:
    """The last '...' before ``pos``: what a did-you-mean or a fix refers to."""
    return re.findall(r"'([^']*)'", message[:pos])[-1]


def _values(text: str) -> list[str]:
    """The values that follow a flag in a message, up to a word or a stop."""
    out = []
    for word in text.split(" "):
        clean = word.rstrip(";,)")
        if not clean or clean in STOP or clean.startswith(("--", "(")):
            break
        out.append(clean)
        if clean != word:
            break
    return out


# -- a command line, changed as a message says ----------------------------------------------
def _flag_span(argv: list[str], name: str) -> tuple[int, int] | None:
    """[start, end) of flag ``name`` and its values in ``argv``."""
    for i, a in enumerate(argv):
        if a == name or a.startswith(name + "="):
            end = i + 1
            while a == name and end < len(argv) and not argv[end].startswith("--"):
                end += 1
            return i, end
    return None


def _set_flag(argv, name, values):
    span = _flag_span(argv, name)
    if span is None:
        return argv + [name, *values]
    return argv[:span[0]] + [name, *values] + argv[span[1]:]


def _drop_flag(argv, name):
    span = _flag_span(argv, name)
    assert span is not None, f"the message names {name}, which is not in {argv}"
    return argv[:span[0]] + argv[span[1]:]


def _set_grid(argv, entry):
    """``argv`` with its --grid entry for ``entry``'s name replaced by ``entry``."""
    key = entry.split("=")[0] + "="
    return [entry if a.startswith(key) else a for a in argv]


def _drop_grid(argv, entry):
    out = [a for a in argv if a != entry]
    span = _flag_span(out, "--grid")
    if span and span[1] - span[0] == 1:  # no entries left
        out = out[:span[0]] + out[span[1]:]
    return out


def _rename(argv, bad, good):
    out = []
    for a in argv:
        if bad.startswith("--"):
            a = good + a[len(bad):] if a == bad or a.startswith(bad + "=") else a
        elif bad in a:
            a = a.replace(bad, good)
        out.append(a)
    return out


def argv_fix(message: str, argv: list[str]) -> list[str] | None:
    """``argv`` changed as the first fix ``message`` spells out says, or None."""
    found = []  # (position in the message, changed argv)
    for m in re.finditer(r"\(did you mean '([^']+)'", message):
        found.append((m.start(), _rename(argv, _quoted_before(message, m.start()), m.group(1))))
    for m in re.finditer(rf"({FLAG}) is spelled ({FLAG}) now", message):
        found.append((m.start(), _rename(argv, m.group(1), m.group(2))))
    for m in re.finditer(rf"replace --grid (\S+) with ({FLAG}) ", message):
        values = _values(message[m.end():])
        found.append((m.start(), _set_flag(_drop_grid(argv, m.group(1)), m.group(2), values)))
    for m in re.finditer(rf"(?:pass|use) ({FLAG}) with one of ([^,;\s]+)", message):
        found.append((m.start(), _set_flag(argv, m.group(1), [m.group(2)])))
    for m in re.finditer(rf"(?:pass|use|e\.g\.) ({FLAG})[ =]", message):
        values = _values(message[m.end():])
        if m.group(1) == "--grid" and values:
            found.append((m.start(), _set_grid(argv, values[0])))
        elif values:
            found.append((m.start(), _set_flag(argv, m.group(1), values)))
    for m in re.finditer(rf"drop ({FLAG}|it)\b", message):
        name = m.group(1) if m.group(1) != "it" else re.search(FLAG, message).group(0)
        found.append((m.start(), _drop_flag(argv, name)))
    return min(found, key=lambda f: f[0])[1] if found else None


# -- a sweep file, changed as a message says ------------------------------------------------
def _line_key(line: str) -> str | None:
    """The option a sweep file's line sets, spelled with dots (``ppo.lr``), or None."""
    try:
        parsed = tomllib.loads(line)
    except tomllib.TOMLDecodeError:
        return None
    key, value = next(iter(parsed.items()), (None, None))
    while isinstance(value, dict) and len(value) == 1 and not line.lstrip().startswith("["):
        sub, value = next(iter(value.items()))
        key = f"{key}.{sub}"
    return key


def _sections(text: str) -> list[list[str]]:
    """The file's lines by table: [["" (top level), lines...], ["[grid]", lines...], ...]."""
    out = [[""]]
    for line in text.splitlines():
        if line.strip().startswith("["):
            out.append([line.strip()])
        elif line.strip():
            out[-1].append(line)
    return out


def _join(sections) -> str:
    return "\n".join(line for s in sections for line in s if line) + "\n"


def _table(sections, name: str) -> list[str]:
    header = f"[{name}]" if name else ""
    for s in sections:
        if s[0] == header:
            return s
    sections.append([header])
    return sections[-1]


def _unset(sections, key: str) -> str | None:
    """Remove the line that sets ``key`` (anywhere); returns it."""
    for s in sections:
        for line in s[1:]:
            if _line_key(line) == key:
                s.remove(line)
                return line
    return None


def toml_fix(message: str, text: str) -> str | None:
    """Sweep file ``text`` changed as the first fix ``message`` spells out says, or None."""
    found = []
    first = re.search(r"'([^']*)'", message)
    offending = first.group(1) if first else None
    named_table = re.search(r"\[([a-z_]+)\]", message)
    for m in re.finditer(r"\(did you mean '([^']+)'", message):
        bad, good = _quoted_before(message, m.start()), m.group(1)
        sections = _sections(text)
        for s in sections:
            if s[0] == f"[{bad}]":
                s[0] = f"[{good}]"
            for i, line in enumerate(s[1:], 1):
                if _line_key(line) == bad:
                    s[i] = f"{json.dumps(good)} = {line.split('=', 1)[1].strip()}"
                else:
                    s[i] = line.replace(json.dumps(bad), json.dumps(good))
        found.append((m.start(), _join(sections)))
    value = r"(?P<v>.+?)(?= in \[| \(|\)|;| instead|$)"
    for m in re.finditer(rf"(?:write|e\.g\.) (?!it\b)(?P<k>\"[^\"]+\"|[\w.-]+) = {value}"
                         rf"(?P<t> in \[[a-z_]+\])?(?P<i> instead)?", message):
        sections = _sections(text)
        table = m.group("t")[5:-1] if m.group("t") else \
            named_table.group(1) if named_table else ""
        key = json.loads(m.group("k")) if m.group("k").startswith('"') else m.group("k")
        if m.group("i"):
            _unset(sections, offending)
        lines = _table(sections, table)
        for line in list(lines[1:]):
            if _line_key(line) == key:
                lines.remove(line)
        lines.append(f"{m.group('k')} = {m.group('v')}")
        found.append((m.start(), _join(sections)))
    for m in re.finditer(r"move it to \[([a-z_]+)\]", message):
        sections = _sections(text)
        line = _unset(sections, offending)
        _table(sections, m.group(1)).append(line)
        found.append((m.start(), _join(sections)))
    for m in re.finditer(r"drop the key", message):
        sections = _sections(text)
        assert _unset(sections, offending) is not None
        found.append((m.start(), _join(sections)))
    for m in re.finditer(r"add (\S+) to (algos|envs)", message):
        item = m.group(1) if m.group(1) != "it" else \
            re.search(r'\[env_config\."([^"]+)"\]', message).group(1)
        spec = tomllib.loads(text)
        sections = _sections(text)
        _unset(sections, m.group(2))
        sections[0].append(f"{m.group(2)} = {json.dumps(spec[m.group(2)] + [item])}")
        found.append((m.start(), _join(sections)))
    return min(found, key=lambda f: f[0])[1] if found else None


# -- the commands ---------------------------------------------------------------------------
def run_cli(*argv) -> int:
    """``pgjax ARGV``'s exit code (argparse's errors exit)."""
    try:
        return main(list(argv))
    except SystemExit as e:
        return e.code


def _error(capsys, code: int) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err.split(": error: ", 1)[-1]


TRAIN = [  # (arguments, fixes needed): each also gets --env jax:cartpole unless it sets one
    (["--ppo.lrr", "1e-3"], 1),
    (["--gama", "0.9"], 1),
    (["--ppo.lrr=1e-3"], 1),
    (["--env", "jax:cartpol"], 1),
    (["--algo", "spo", "--spo.lr", "0"], 1),
    (["--algo", "ppo_kl", "--ppo-kl.lr", "0"], 1),
    (["--grid", "ppo.lr=1e-3,-1"], 1),
    (["--grid", "gamma=0.9,1.5"], 1),
    (["--gamma", "1.5"], 1),
    (["--grid", "ppo.epochs=1,2"], 1),
    (["--grid", "ppo.lrr=1e-3"], 1),
    (["--evals", "-1"], 1),
    (["--steps", "100000000000000000000"], 1),
    (["--seed", "-1"], 1),
    (["--label", "{algo}_{ppo.lrr}"], 1),
    (["--ppo.ent-coef", "nan"], 1),
    (["--net.init-log-std", "inf"], 1),
    (["--algo", "trpo", "--trpo.delta", "0"], 1),
    (["--algo", "trpo", "--ppo.lr", "1e-3"], 1),
    (["--stateful.z-dim", "3"], 1),
    (["--policy", "stateful", "--z-dim", "3"], 1),
    (["--z-dim", "3"], 2),  # renamed, then an option of a policy this run does not use
    (["--num-envs", "10", "--rollout-len", "10"], 1),
    (["--ppo.epochs", "0"], 1),
    (["--ppo.adam-eps", "0"], 1),
    (["--net.actor-hidden", "0", "64"], 1),
    (["--policy", "gaussian"], 1),
    (["--algo", "a2c"], 1),
    (["--agent-update", "x"], 1),
    (["--eval-mode", "stochastc"], 1),
    (["--preset", "cleanrll"], 1),
    (["--checkpoint-seconds", "-5"], 1),
]


@pytest.mark.parametrize("args,steps", TRAIN, ids=[" ".join(a) for a, _ in TRAIN])
def test_train_hints_followed_literally_are_accepted(args, steps, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", _accept)  # accepted: about to compile
    argv = args if "--env" in args else ["--env", "jax:cartpole", *args]
    messages = []
    for attempt in range(steps + 1):
        out = ["--out", str(tmp_path / str(attempt)), "--quiet"]
        try:
            code = main(["train", *argv, *out])
        except Accepted:
            break
        message = _error(capsys, code)
        assert message not in messages, f"the fix {argv} gives the same error again: {message}"
        messages.append(message)
        fixed = argv_fix(message, argv)
        assert fixed is not None and fixed != argv, f"no fix to follow in: {message}"
        argv = fixed
    else:
        pytest.fail(f"still refused after following {steps} hints: {messages}")
    assert len(messages) == steps, messages


HEAD = 'algos = ["ppo"]\nenvs = ["jax:cartpole"]\n'
SWEEP = [  # (sweep file, fixes needed)
    (HEAD + '[grid]\n"ppo.lr" = 3e-4\n', 1),
    (HEAD + "[grid]\nppo.lr = 3e-4\n", 1),  # unquoted: TOML reads a table ppo
    (HEAD + "[grid]\nppo.lr = []\n", 1),
    (HEAD + '[grid]\n"ppo.lrr" = [1e-4]\n', 1),
    (HEAD + '[grid]\n"ppo.epochs" = [1, 2]\n', 1),
    (HEAD + '[grid]\ngamma = ["a"]\n', 1),
    (HEAD + "[grid]\ngamma = [0.9, 1.5]\n", 1),
    (HEAD + '[grid]\n"ppo.lr" = [1e-3, -1]\n', 1),
    (HEAD + '[grid]\n"spo.lr" = [1e-3]\n', 1),
    (HEAD + '[static]\n"ppo.epochs" = 3\n', 1),
    (HEAD + '[config]\n"ppo.lr" = 0\n', 1),
    (HEAD + '[config]\n"ppo.lrr" = 0.1\n', 1),
    (HEAD + "[config]\nstepz = 1000\n", 1),
    (HEAD + '[config]\nsteps = "1000"\n', 1),
    (HEAD + "[config]\nz_dim = 3\npolicy = \"stateful\"\n", 1),
    (HEAD + "[config]\nevals = -1\n", 1),
    (HEAD + '[config]\npolicy = "gaussian"\n', 1),
    (HEAD + "[config]\nnum_envs = 10\nrollout_len = 10\n", 1),
    (HEAD + '[config]\n"ppo.ent_coef" = nan\n', 1),
    (HEAD + '[env_config."jax:memory"]\nsteps = 10000\n', 1),
    (HEAD + "seedz = 3\n", 1),
    (HEAD + "steps = 1000\n", 1),
    (HEAD + "seeds = \"3\"\n", 1),
    (HEAD + "[confg]\nsteps = 1000\n", 1),
    ('algos = ["ppo"]\nenvs = ["jax:cartpol"]\n', 1),
    ('algos = ["ppo"]\nenvs = []\n', 1),
]


@pytest.mark.parametrize("text,steps", SWEEP, ids=[t[len(HEAD):] or t for t, _ in SWEEP])
def test_sweep_hints_followed_literally_are_accepted(text, steps, capsys, monkeypatch,
                                                     tmp_path):
    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", _accept)
    path = tmp_path / "s.toml"
    messages = []
    for _ in range(steps + 1):
        path.write_text(f'out = "{tmp_path}"\n{text}')
        code = main(["sweep", str(path), "--dry-run"])
        if code == 0:
            break
        message = _error(capsys, code)
        assert message not in messages, f"the fix gives the same error again: {message}"
        messages.append(message)
        fixed = toml_fix(message, text)
        assert fixed is not None and fixed != text, f"no fix to follow in: {message}"
        text = fixed
    else:
        pytest.fail(f"still refused after following {steps} hints: {messages}\n{text}")
    assert len(messages) == steps, messages


def test_dotted_keys_in_a_sweep_file_need_no_quotes(tmp_path):
    """``ppo.lr = [...]`` unquoted is a TOML table ``ppo``; the sweep reads it as the
    option ``"ppo.lr"`` in every option table, as the hints write it."""
    from pgjax.tools.sweep import Sweep

    path = tmp_path / "s.toml"
    path.write_text(HEAD + f'out = "{tmp_path}"\n[config]\nppo.epochs = 2\n'
                    f"[grid]\nppo.lr = [1e-4, 3e-4]\n[static]\nnet.actor_hidden = [[8], [16]]\n")
    sweep = Sweep.from_file(path)
    assert len(sweep.groups) == 2
    for cfg in sweep.groups.values():
        assert cfg.ppo.epochs == 2 and cfg.grid == ("ppo.lr=0.0001,0.0003",)
    assert sorted(c.net.actor_hidden for c in sweep.groups.values()) == [(8,), (16,)]


# -- eval, render, plot ---------------------------------------------------------------------
def _run_dir(root, ids=("seed0", "seed1")):
    """A finished run directory as `pgjax train` leaves it, as far as a reader looks before
    building anything (no real parameters: nothing here evaluates)."""
    (root / "runs").mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({
        "config": {"env": "jax:cartpole"},
        "runs": [{"id": i, "seed": int(i.rpartition("seed")[2]),
                  "hparams": {"ppo.lr": 0.001} if i.startswith("lr=") else {}}
                 for i in ids]}))
    (root / "status.json").write_text(json.dumps({"status": "finished"}))
    for i in ids:
        (root / "runs" / i).mkdir()
        (root / "runs" / i / "metrics.csv").write_text("iteration\n")
        (root / "runs" / i / "params.msgpack").write_bytes(b"")
    return root


READERS = [  # (command, arguments after the path)
    ("eval", ["--run", "seed7"]),
    ("eval", ["--run", "sed0"]),
    ("eval", ["--epsiodes", "3"]),
    ("eval", ["--episodes", "0"]),
    ("render", ["--out", "x.avi"]),
    ("render", ["--out", "x.mp4", "--width", "8"]),
    ("render", ["--out", "x.mp4", "--widht", "100"]),
    ("plot", ["--estimater", "mean"]),
    ("plot", ["--estimator", "iqn"]),
    ("plot", ["--reps", "0"]),
    ("plot", ["--final-window", "1.5"]),
]


@pytest.mark.parametrize("command,args", READERS, ids=[f"{c} {' '.join(a)}" for c, a in READERS])
def test_reader_hints_followed_literally_are_accepted(command, args, capsys, monkeypatch,
                                                      tmp_path):
    monkeypatch.setattr(pgjax.tools.trained, "Trainer", _accept)  # eval: about to build, compile
    monkeypatch.setattr(pgjax.tools.render, "load_policy", _accept)
    monkeypatch.setattr(pgjax.tools.plotting, "load", _accept)
    path = str(_run_dir(tmp_path / "r"))
    args = [a.replace("x.", str(tmp_path / "x.")) for a in args]
    code = run_cli(command, path, *args)
    message = _error(capsys, code)
    fixed = argv_fix(message, args)
    assert fixed is not None and fixed != args, f"no fix to follow in: {message}"
    with pytest.raises(Accepted):
        run_cli(command, path, *fixed)
        pytest.fail(f"{fixed} refused: {capsys.readouterr().err}")


def test_an_unknown_run_id_lists_the_ids(tmp_path, capsys):
    root = _run_dir(tmp_path / "r", ids=("seed0", "lr=0.001_seed0"))
    assert main(["eval", str(root), "--run", "seed7"]) == 2
    err = capsys.readouterr().err
    assert "(did you mean 'seed0'?)" in err and "one of seed0, lr=0.001_seed0" in err, err
    sweep = tmp_path / "s"
    _run_dir(sweep / "a")
    _run_dir(sweep / "b", ids=("seed3",))
    assert main(["eval", str(sweep), "--run", "seed4"]) == 2
    err = capsys.readouterr().err
    assert "one of seed0, seed1, seed3" in err and len(err.strip().splitlines()) == 1, err


def _fake_evaluate(path, *args, **kwargs):
    root = pgjax.tools.trained._run_dir_root(path)[0]
    return pd.DataFrame([{"group": root.name, "run": r, "seed": 0, "finished": True,
                          "episodes": 2, "policy": "deterministic", "return_mean": 1.0,
                          "ci95_lo": 1.0, "ci95_hi": 1.0, "return_std": 0.0,
                          "length_mean": 1.0} for r in ("seed0", "seed1")])


def test_eval_of_a_sweep_folder_evaluates_each_run_directory(tmp_path, capsys, monkeypatch):
    """`pgjax eval <folder>` evaluates every finished run directory under it, as `pgjax plot`
    finds them: each one's eval.csv, or with --out one CSV with a run_dir column."""
    monkeypatch.setattr(pgjax.tools.trained, "evaluate", _fake_evaluate)
    sweep = tmp_path / "sweep"
    for name in ("ppo_a", "trpo_a"):
        _run_dir(sweep / name)
    unfinished = _run_dir(sweep / "spo_a")
    (unfinished / "status.json").unlink()
    (sweep / "sweep.json").write_text("{}")
    assert main(["eval", str(sweep)]) == 0
    captured = capsys.readouterr()
    assert (sweep / "ppo_a" / "eval.csv").exists() and (sweep / "trpo_a" / "eval.csv").exists()
    assert not (unfinished / "eval.csv").exists() and "spo_a is unfinished" in captured.err
    assert "ppo_a" in captured.out and "trpo_a" in captured.out
    out = tmp_path / "all.csv"
    assert main(["eval", str(sweep), "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert list(table.columns[:2]) == ["run_dir", "group"]
    assert sorted(set(table["run_dir"])) == [str(sweep / "ppo_a"), str(sweep / "trpo_a")]
    assert len(table) == 4
    assert main(["eval", str(tmp_path / "empty_but_missing")]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["eval", str(tmp_path / "empty")]) == 2
    assert "holds no finished run directory" in capsys.readouterr().err


@pytest.mark.slow
def test_eval_of_a_trained_sweep_folder(tmp_path, capsys):
    from pgjax.tools.sweep import Sweep

    path = tmp_path / "s.toml"
    path.write_text('algos = ["ppo"]\nenvs = ["jax:cartpole"]\n'
                    f'out = "{tmp_path}"\nseeds = 2\n[config]\nnum_envs = 8\nrollout_len = 16\n'
                    "steps = 512\neval_every = 2\neval_envs = 2\nepisode_length = 50\n"
                    'quiet = true\ncheckpoint_every = 0\n"ppo.minibatches" = 4\n'
                    '"ppo.epochs" = 1\n[static]\n"net.actor_hidden" = [[8], [16]]\n')
    sweep = Sweep.from_file(path)
    sweep.run(log=lambda *a: None)
    assert main(["eval", str(tmp_path / "s"), "--episodes", "3"]) == 0
    assert len(sweep.groups) == 2
    for group in sweep.groups:
        table = pd.read_csv(tmp_path / "s" / group / "eval.csv")
        assert len(table) == 2 and (table["episodes"] == 3).all()
    assert main(["eval", str(tmp_path / "s"), "--run", "seed1", "--out",
                 str(tmp_path / "e.csv")]) == 0
    table = pd.read_csv(tmp_path / "e.csv")
    assert list(table["run"]) == ["seed1", "seed1"] and table["run_dir"].nunique() == 2


# -- help and plugins -----------------------------------------------------------------------
@pytest.mark.parametrize("command", ["eval", "render", "plot", "sweep"])
def test_help_reads_as_plain_text(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    assert f"pgjax {command}" in text
    assert "``" not in text and not re.search(r"::$|:[a-z]+:`|`", text, re.M), text


def test_a_plugin_that_does_not_parse_names_its_file_and_line(tmp_path, capsys):
    plugin = tmp_path / "broken_plugin.py"
    plugin.write_text("x = 1\ndef f(:\n    pass\n")
    assert main(["train", "--env", "jax:cartpole", "--plugins", str(plugin)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "frozen" not in err, err
    assert f"{plugin}:2" in err and "SyntaxError" in err and "invalid syntax" in err, err
    assert "pass --plugins without it" in err
