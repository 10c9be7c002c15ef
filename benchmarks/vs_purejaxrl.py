"""pgjax PPO against purejaxrl's single-file PPO at purejaxrl's own settings: compile time,
steady training throughput and whole-process time per env step, first run and cached run.

purejaxrl is run from a checkout whose path is given (its ``purejaxrl/ppo_continuous_action.py``
and ``wrappers.py``, unmodified; nothing of it is copied here), with two stand-ins on its path
(``benchmarks/_purejaxrl_shim``): distrax's diagonal normal, since distrax's TensorFlow
Probability backend does not import under the JAX pgjax pins, and an empty ``navix`` module
for a wrapper this benchmark does not use. Both sides run on the same JAX, in this
environment.

Settings (purejaxrl's ``ppo_continuous_action.py`` defaults, scaled to a 2-core CPU as the
comparison that motivated this benchmark): Brax ``hopper``, positional backend, 256 envs x 20
steps, 4 epochs x 32 minibatches, 256-256 tanh networks, lr 3e-4 not annealed, observation
and reward normalisation, about 1M env steps (purejaxrl: 195 updates, 998,400 steps; pgjax:
200 updates, 1,024,000: its chunks of 10). purejaxrl's ``DEBUG`` printing (a host callback
per update) is off. pgjax runs ``pgjax train`` two ways (``--pgjax``):

- ``defaults``: its defaults otherwise (records, progress, one held-out evaluation of 16
  episodes after the last chunk, checkpoints at most every 120 s, a reset pool redrawn
  once per rollout);
- ``protocol``: also purejaxrl's protocol where pgjax's defaults do more work:
  ``--reset-pool fixed`` (each env restarts from the reset state it drew at the start, as
  purejaxrl's Brax wrapper does) and ``--evals 0`` (no held-out evaluation: like
  purejaxrl, the records hold the training episodes' returns).

Each round runs, one after the other, each in a fresh process: purejaxrl; then for each
pgjax way, pgjax with an empty compilation cache (a first run) and again from the cache that
run filled. Reported
per process: compile time (JAX's own monitoring events: tracing, lowering and XLA
compilation, summed), steady throughput (purejaxrl: env steps over its one program's
execution; pgjax: a chunk's env steps over the median chunk time of its records), and the
whole process's wall time per env step. Ratios are purejaxrl's time per env step over
pgjax's (above 1: pgjax is faster).

    python benchmarks/vs_purejaxrl.py --purejaxrl /path/to/purejaxrl --rounds 2
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHIM = ROOT / "benchmarks" / "_purejaxrl_shim"

# purejaxrl's config keys, at the settings above
PUREJAXRL = {"LR": 3e-4, "NUM_ENVS": 256, "NUM_STEPS": 20, "UPDATE_EPOCHS": 4,
             "NUM_MINIBATCHES": 32, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2,
             "ENT_COEF": 0.0, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh",
             "ANNEAL_LR": False, "NORMALIZE_ENV": True, "DEBUG": False}
# the same for pgjax train (its other defaults: gamma, lambda, clip, vf coef, grad clip)
PGJAX = ["--brax.backend", "positional", "--num-envs", "256", "--rollout-len", "20",
         "--ppo.epochs", "4", "--ppo.minibatches", "32", "--net.actor-hidden", "256", "256",
         "--net.critic-hidden", "256", "256", "--ppo.lr", "3e-4", "--ppo.no-anneal-lr"]
# the pgjax ways a round runs (--pgjax): the extra options of each
WAYS = {"defaults": [], "protocol": ["--reset-pool", "fixed", "--evals", "0"]}

# sums JAX's compile events (tracing, lowering, XLA) of the process it runs in, and the wall
# time during which any of them was under way (the union of their intervals: compiles on two
# threads at once count once)
LISTEN = r'''
import atexit, json, sys, time
import jax.monitoring
EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace_s",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
          "/jax/core/compile/backend_compile_duration": "xla_s"}
spent = dict.fromkeys(EVENTS.values(), 0.0)
spans = []
def _listen(event, seconds, **_):
    if event in EVENTS:
        spent[EVENTS[event]] += seconds
        spans.append((time.perf_counter() - seconds, time.perf_counter()))
def _report():
    wall, reach = 0.0, float("-inf")
    for a, b in sorted(spans):
        wall += max(0.0, b - max(a, reach))
        reach = max(reach, b)
    print("COMPILE " + json.dumps({**spent, "compile_wall_s": wall}), flush=True)
jax.monitoring.register_event_duration_secs_listener(_listen)
atexit.register(_report)
'''

RUN_PUREJAXRL = LISTEN + r'''
t_launch = float(sys.argv[1])
sys.path[:0] = [sys.argv[2], sys.argv[3]]  # the stand-ins first, then purejaxrl's folder
import jax
import ppo_continuous_action as pjx
config = json.loads(sys.argv[4])
train = jax.jit(pjx.make_train(config))
rng = jax.random.PRNGKey(30)
t = time.time()
compiled = train.lower(rng).compile()
compile_wall = time.time() - t
t = time.time()
out = jax.block_until_ready(compiled(rng))
run_s = time.time() - t
steps = config["NUM_UPDATES"] * config["NUM_STEPS"] * config["NUM_ENVS"]
ret = out["metrics"]["returned_episode_returns"][-1].mean()
print("RESULT " + json.dumps({"lower_compile_s": compile_wall, "run_s": run_s,
                              "env_steps": int(steps), "steps_per_s": steps / run_s,
                              "last_update_train_return": float(ret)}), flush=True)
'''

RUN_PGJAX = LISTEN + r'''
from pgjax.cli import main
code = main(sys.argv[1:])
if code:
    sys.exit(code)
'''


def _parse(stdout: str, tag: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith(tag + " ")]
    return json.loads(lines[-1][len(tag) + 1:]) if lines else {}


def _run(code: str, args: list[str], cache: Path) -> tuple[dict, dict, float]:
    env = {**os.environ, "PGJAX_COMPILE_CACHE": str(cache)}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # each side starts with nothing compiled
    t = time.time()
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       env=env, cwd=ROOT)
    whole = time.time() - t
    if p.returncode:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"a benchmark process failed ({p.returncode}): {tail}")
    return _parse(p.stdout, "RESULT"), _parse(p.stdout, "COMPILE"), whole


def _compile(events: dict) -> dict:
    """compile_s: the compile events' sum; compile_wall_s: the wall time any was under way."""
    return {"compile_s": sum(v for k, v in events.items() if k != "compile_wall_s"), **events}


def purejaxrl(checkout: Path, steps: int, cache: Path) -> dict:
    config = {**PUREJAXRL, "ENV_NAME": "hopper", "TOTAL_TIMESTEPS": steps}
    r, c, whole = _run(RUN_PUREJAXRL, [str(time.time()), str(SHIM),
                                       str(checkout / "purejaxrl"), json.dumps(config)], cache)
    return {**r, **_compile(c), "whole_s": whole,
            "whole_per_step_us": whole / r["env_steps"] * 1e6}


def pgjax(steps: int, cache: Path, out: Path, name: str, way: str) -> dict:
    args = ["train", "--env", "brax:hopper", *PGJAX, *WAYS[way], "--steps", str(steps),
            "--out", str(out), "--name", name, "--quiet"]
    _, c, whole = _run(RUN_PGJAX, args, cache)
    from pgjax.analysis.results import run_metrics

    root = out / name
    cfg = json.loads((root / "config.json").read_text())["config"]
    run_dir = sorted(d for d in (root / "runs").iterdir() if d.is_dir())[0]
    m = run_metrics(run_dir)
    ends = m[m["iteration"] % cfg["eval_every"] == 0]
    chunks = np.diff(ends["wall_time_s"].to_numpy())  # row 0: the initial one
    chunk_steps = cfg["eval_every"] * cfg["num_envs"] * cfg["rollout_len"]
    env_steps = int(ends["iteration"].to_numpy()[-1]) * cfg["num_envs"] * cfg["rollout_len"]
    return {**_compile(c), "whole_s": whole, "env_steps": env_steps,
            "steps_per_s": chunk_steps / float(np.median(chunks[1:])),
            "whole_per_step_us": whole / env_steps * 1e6,
            # the last held-out evaluation (None with --evals 0) and training episodes' return
            "last_eval_return": _last(m["eval_return"]),
            "last_train_return": _last(m["train_return"])}


def _last(column) -> float | None:
    """A column's last recorded value (None where it has none: valid JSON, unlike NaN)."""
    values = column.dropna().to_numpy()
    return float(values[len(values) - 1]) if len(values) else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--purejaxrl", required=True, type=Path,
                   help="a checkout of github.com/luchris429/purejaxrl (its root folder)")
    p.add_argument("--steps", type=int, default=1_000_000,
                   help="env steps (each side rounds to its whole updates or chunks)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--pgjax", nargs="+", choices=list(WAYS), default=list(WAYS),
                   help="the ways pgjax runs: at its defaults, and/or at purejaxrl's protocol "
                        "(fixed reset states, no held-out evaluation)")
    p.add_argument("--commit", help="purejaxrl's commit, where the checkout is not a git one")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                   "vs_purejaxrl.json")
    a = p.parse_args()
    script = a.purejaxrl / "purejaxrl" / "ppo_continuous_action.py"
    if not script.is_file():
        p.error(f"{script} does not exist: pass the root of a purejaxrl checkout")
    commit = subprocess.run(["git", "-C", str(a.purejaxrl), "rev-parse", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or a.commit
    # pgjax's steps: whole chunks of 10 updates of 5,120 at or above purejaxrl's
    pgjax_steps = -(-a.steps // 51_200) * 51_200
    rounds = []
    for i in range(a.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            row = {"purejaxrl": purejaxrl(a.purejaxrl, a.steps, tmp / "cache-purejaxrl")}
            for way in a.pgjax:  # each way its own cache: a first run compiles everything
                for run in ("first", "cached"):
                    row[f"{way}_{run}"] = pgjax(pgjax_steps, tmp / f"cache-{way}",
                                                tmp / "runs", f"{way}-{run}", way)
        pj = row["purejaxrl"]
        said = [f"round {i + 1}: purejaxrl compile {pj['compile_wall_s']:.1f} s, "
                f"{pj['steps_per_s']:,.0f} steps/s, whole {pj['whole_s']:.1f} s"]
        for way in a.pgjax:
            for run in ("first", "cached"):
                r = row[f"{way}_{run}"]
                r["speed"] = pj["whole_per_step_us"] / r["whole_per_step_us"]
                said.append(f"pgjax {way} {run}: compile {r['compile_wall_s']:.1f} s, "
                            f"{r['steps_per_s']:,.0f} steps/s, whole {r['whole_s']:.1f} s, "
                            f"{r['speed']:.2f}x per env step")
        rounds.append(row)
        print(" | ".join(said), flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"machine": platform.processor() or platform.machine(),
                                 "cpus": os.cpu_count(), "purejaxrl_commit": commit,
                                 "rounds": rounds}, indent=1))
    print(f"written to {a.out}")


if __name__ == "__main__":
    main()
