"""The state of a run directory, read from its files alone: ``inspect`` is the one place
that says whether a directory is new, unfinished, finished or damaged (see ``pgjax.loop.records``
for what a run directory holds and the transitions between its states), and every command
that reads or writes one asks it."""
from __future__ import annotations

import csv
import gzip
import io
import json
import zlib
from pathlib import Path
from typing import NamedTuple

from pgjax.core.errors import ConfigError


def read_json(path: Path, what: str, fix: str | None = None) -> dict:
    """A record's JSON, or a one-line ``ConfigError`` when it is unreadable or torn (``fix``:
    what to do instead of the default advice)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        fix = f"restore {what} from a copy, or pass --overwrite to start the run over (the " \
              f"old one is set aside in .trash)" if fix is None else fix
        raise ConfigError(f"{path} is damaged ({type(e).__name__}){'; ' + fix if fix else ''}") \
            from None


METRICS = "metrics.csv"  # a run's per-update rows while it trains
PACKED = "metrics.csv.gz"  # the same rows, compressed, once its run directory has finished
ID_BYTES = 200  # the longest run id: a folder name (at most 255 bytes) with room to spare


def metrics_file(run_dir) -> Path | None:
    """Where a run's metrics rows are: ``metrics.csv`` (training, or finished before records
    were compressed) or ``metrics.csv.gz`` (``pack_metrics``); None when it has none yet.
    Every reader finds them here."""
    for name in (METRICS, PACKED):
        if (Path(run_dir) / name).exists():
            return Path(run_dir) / name
    return None


def metrics_text(path: Path) -> str:
    """The CSV text of a metrics file, plain or compressed (``OSError``/``UnicodeDecodeError``
    /``EOFError`` for an unreadable one)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:  # compressed (``pack_metrics``) since it was found: read that
        if path.name != METRICS or not (path.parent / PACKED).exists():
            raise
        path = path.parent / PACKED
        raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


def pack_metrics(run_dir) -> None:
    """Replace a finished run's ``metrics.csv`` by ``metrics.csv.gz`` (the same text,
    deterministic gzip: a third of the size; records are never written to again once
    finished). The compressed file is whole before the plain one goes, so a kill in between
    leaves both, with the same rows."""
    from pgjax.core.files import atomic_write_bytes

    plain = Path(run_dir) / METRICS
    if not plain.exists():
        return
    atomic_write_bytes(Path(run_dir) / PACKED,
                       gzip.compress(plain.read_bytes(), compresslevel=9, mtime=0))
    plain.unlink()


def read_rows(run_dir) -> list[dict]:
    """The metrics rows of a run (none when it has no metrics file)."""
    path = metrics_file(run_dir)
    if path is None:
        return []
    return list(csv.DictReader(io.StringIO(metrics_text(path), newline="")))


class DirState(NamedTuple):
    """What ``inspect`` finds in a run directory: ``state`` (new, unfinished, finished,
    damaged; or foreign: a directory that is not a run's and that nothing replaces), ``reason`` (damaged: which file and what is wrong, with a fix that loses
    nothing; unfinished: why, where it is not simply a stopped run) and ``record`` (its
    config.json, when readable)."""

    state: str
    reason: str = ""
    record: dict | None = None


def run_status(run_dir) -> dict | None:
    """A run's own ``status.json`` ({"status": "failed", "update", "error"}), or None; a
    damaged one is a one-line ``ConfigError`` naming it."""
    path = Path(run_dir) / "status.json"
    if not path.exists():
        return None
    st = read_json(path, "the run's status.json",
                   "delete it if the run did not fail (its metrics tell how far it trained), "
                   "or restore it from a copy")
    if not isinstance(st, dict) or st.get("status") != "failed" or \
            not isinstance(st.get("update", 0), int):
        raise ConfigError(f"{path} is damaged (not a failed run's status); delete it if the "
                          f"run did not fail (its metrics.csv then tells how far it trained)")
    return st


def check_run_entry(root: Path, entry: dict) -> None:
    """One run of a run directory's manifest (config.json ``runs``) is what pgjax wrote: a
    seed in the range a run can have, traced hyperparameters that are finite numbers a
    float32 holds, an id that names its seed, and the run's own config.json (where there is
    one) recording the same seed and hyperparameters. A one-line ``ConfigError`` otherwise
    (a hand-edited or foreign record is never used under a wrong label)."""
    import math

    from pgjax.core.errors import INT_MAX

    fix = "restore it from a copy, or pass --overwrite to train the run again (the old " \
          "records are set aside in .trash)"
    where, rid = root / "config.json", entry["id"]
    seed, hp = entry.get("seed"), entry.get("hparams", {})
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= INT_MAX:
        raise ConfigError(f"{where} is damaged (run {rid}: seed {str(seed)[:40]!r} is not an "
                          f"integer in [0, {INT_MAX}]); {fix}")
    if not isinstance(hp, dict):
        raise ConfigError(f"{where} is damaged (run {rid}: hparams is not a table); {fix}")
    for k, v in hp.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) \
                or abs(v) > 3.4028234e38:
            raise ConfigError(f"{where} is damaged (run {rid}: {k} = {str(v)[:40]} is not a "
                              f"finite number a float32 holds); {fix}")
    if not rid.endswith(f"seed{seed}"):
        raise ConfigError(f"{where} is damaged (run {rid} is recorded with seed {seed}); {fix}")
    own = root / "runs" / rid / "config.json"
    if own.exists():
        mine = read_json(own, "the run's config.json")
        if not isinstance(mine, dict) or mine.get("seed") != seed or \
                mine.get("hparams", hp) != hp:
            raise ConfigError(f"{own} does not match {where} (run {rid}: seed or "
                              f"hyperparameters differ); {fix}")


def inspect(root) -> DirState:
    """The state of run directory ``root`` (see the module docstring), from its files only:
    nothing is written and nothing compiles."""
    root = Path(root)
    if not (root / "config.json").exists():
        held = sorted(p.name for p in root.iterdir() if p.name != ".lock") \
            if root.is_dir() else []
        if held and (root / "runs").is_dir():  # a run's records without their manifest
            return DirState("damaged", f"{root / 'config.json'} is missing but the directory "
                                       f"holds {', '.join(held[:3])}; restore config.json, or "
                                       f"pass --overwrite to train it again (the old records "
                                       f"are set aside in .trash)")
        if held:  # not a run directory at all (a sweep, other files): never replaced
            return DirState("foreign", f"{root} is not a run directory (it holds "
                                       f"{', '.join(held[:3])}); pick another --name or --out")
        return DirState("new")
    try:
        record = read_json(root / "config.json", "the run's config.json")
        if not isinstance(record, dict) or not isinstance(record.get("runs"), list) or \
                not isinstance(record.get("config"), dict):
            raise ConfigError(f"{root / 'config.json'} is damaged (no config or runs entry); "
                              f"restore it from a copy, or pass --overwrite to train the run "
                              f"again (the old records are set aside in .trash)")
        ids = [r.get("id") if isinstance(r, dict) else None for r in record["runs"]]
        seen = set()
        for i in ids:  # every run a dict with one safe folder name, each once
            if not isinstance(i, str) or not i or Path(i).name != i or i in (".", "..") \
                    or i in seen:
                raise ConfigError(f"{root / 'config.json'} is damaged (run id {i!r}); restore "
                                  f"it from a copy, or pass --overwrite to train the run again "
                                  f"(the old records are set aside in .trash)")
            seen.add(i)
        for r in record["runs"]:
            check_run_entry(root, r)
            run_status(root / "runs" / r["id"])
        status = root / "status.json"
        if status.exists():
            try:
                st = read_json(status, "status.json", "")
            except ConfigError:
                st = None
            if isinstance(st, dict) and st.get("status") == "finished":
                for r in record["runs"]:
                    d = root / "runs" / r["id"]
                    if metrics_file(d) is None and not (d / "status.json").exists():
                        raise ConfigError(f"{d / METRICS} is missing from a finished run; "
                                          f"restore it from a copy, or pass --overwrite to "
                                          f"train the run again (the old records are set "
                                          f"aside in .trash)")
                    want = record.get("num_iterations")
                    path = metrics_file(d)
                    if isinstance(want, int) and path is not None and \
                            not (d / "status.json").exists():
                        rows = _row_count(path)
                        if rows is not None and rows != want + 1 and _whole(path):
                            # a finish marker the rows do not bear out: never read as done
                            return DirState("unfinished", f"{status} says finished, but {path} "
                                                          f"holds {rows} of its {want + 1} "
                                                          f"rows", record)
                return DirState("finished", record=record)
            # the metrics decide: --resume finishes a run whose rows are all there
            return DirState("unfinished", f"{status} is damaged", record)
    except ConfigError as e:
        return DirState("damaged", str(e))
    return DirState("unfinished", record=record)


def _row_count(path: Path) -> int | None:
    """The number of data rows in a metrics file (its lines less the header), None when it
    does not read (``check_metrics`` names that)."""
    try:
        text = metrics_text(path)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile, zlib.error):
        return None
    return max(0, text.count("\n") - 1) if text.endswith("\n") else text.count("\n")


def _whole(path: Path) -> bool:
    """Whether a metrics file reads whole (``check_metrics``; a damaged one is named by the
    readers that parse it)."""
    try:
        check_metrics(path)
    except ConfigError:
        return False
    return True


def recorded_rows(root) -> dict:
    """{run id: number of metrics rows} of a run directory (``check_records`` has vouched
    for the files: rows are iterations 0, 1, ... in order)."""
    record = read_json(Path(root) / "config.json", "the run's config.json")
    out = {}
    for r in record["runs"]:
        out[r["id"]] = len(read_rows(Path(root) / "runs" / r["id"]))
    return out


def check_metrics(path: Path, text: str | None = None) -> int:
    """A run's metrics file (``metrics_file``) is whole: it decodes, every row has its
    header's number of cells, every cell is a number and the rows are iterations 0, 1, ...
    in order (``text``: the file's text, already read). Returns the number of rows; a
    one-line ``ConfigError`` names the file and the line otherwise."""
    fix = "restore the file or pass --overwrite to start the run over (the old one is set " \
          "aside in .trash)"
    try:
        rows = list(csv.reader(io.StringIO(metrics_text(path) if text is None else text,
                                           newline="")))
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile, zlib.error,
            csv.Error) as e:
        raise ConfigError(f"{path} is damaged ({type(e).__name__}); {fix}") from None
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    if not header or header[0] != "iteration":
        raise ConfigError(f"{path} is damaged (no header starting with iteration); {fix}")
    for n, row in enumerate(body, 2):
        if len(row) != len(header):
            raise ConfigError(f"{path} is damaged (line {n} has {len(row)} cells, the "
                              f"header {len(header)}); {fix}")
        for name, cell in zip(header, row):
            try:
                float(cell or "nan")
            except ValueError:
                raise ConfigError(f"{path} is damaged (line {n}: {name} = {cell[:20]!r} "
                                  f"is not a number); {fix}") from None
        if float(row[0]) != n - 2:
            raise ConfigError(f"{path} is damaged (line {n} is iteration {row[0]}, "
                              f"expected {n - 2}: rows are missing); {fix}")
    return len(body)


def check_records(root) -> None:
    """Before a resume trains anything: every run's metrics file is whole
    (``check_metrics``)."""
    root = Path(root)
    cfg = read_json(root / "config.json", "the run's config.json")
    for r in cfg.get("runs", []):
        path = metrics_file(root / "runs" / r["id"])
        if path is not None:
            check_metrics(path)


def enclosing_run(path) -> Path | None:
    """The run directory that ``path`` lies inside (a ``config.json`` with runs in one of its
    ancestors), or None."""
    for parent in Path(path).absolute().parents:
        if (parent / "config.json").exists() and (parent / "runs").is_dir():
            return parent
    return None


def check_links(root) -> None:
    """Before anything is written into run directory ``root``: a one-line ``ConfigError``
    when a file or folder in it is a symbolic link leading outside it (a run folder
    received from elsewhere): records are written only inside their directory. Links that
    stay inside it are followed as they are."""
    import os

    root = Path(root)
    real = os.path.realpath(root)
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(top) / name
            if not path.is_symlink():
                continue
            target = os.path.realpath(path)
            if target != real and not target.startswith(real.rstrip(os.sep) + os.sep):
                raise ConfigError(f"{path} is a symbolic link to {target}, outside the run "
                                  f"directory {root}; pgjax writes only inside it: replace "
                                  f"the link by a copy of what it links to (cp -rL), or pass "
                                  f"--overwrite to train the run again")


def is_finished(root) -> bool:
    return inspect(root).state == "finished"


def readable(root, include_unfinished: bool, command: str) -> bool:
    """Whether a reader (``pgjax plot``, ``pgjax eval``) uses run directory ``root``: a
    finished one always; an unfinished one (killed, or still training) only when asked,
    with a note either way; a damaged one is a one-line ``ConfigError``."""
    found = inspect(root)
    if found.state in ("damaged", "foreign"):
        raise ConfigError(found.reason)
    if found.state == "new":
        raise ConfigError(f"{root} holds no run (no config.json); pass a run directory")
    if found.state == "unfinished":
        import sys

        use = "included as it is" if include_unfinished else \
            "left out (pass --include-unfinished to show it as it is)"
        print(f"pgjax {command}: note: {root} is unfinished{' (' + found.reason + ')' if found.reason else ''}; "
              f"{use}", file=sys.stderr)
        return include_unfinished
    return True
