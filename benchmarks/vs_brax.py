"""pgjax PPO against Brax's own PPO trainer (``brax.training.agents.ppo``), and pgjax's
scaling, measured on this machine in one invocation.

    python benchmarks/vs_brax.py --envs ant hopper --steps 491520 --seeds 3
    python benchmarks/vs_brax.py --scaling-only --envs ant

Subprocesses run one after another (nothing else runs meanwhile). Per environment: the raw
environment-stepping ceiling (random actions through pgjax's env in ``lax.scan``) and pgjax
PPO at its default reset scheme (a reset pool redrawn every rollout), once, and the same
ceiling through Brax's own training wrapper (``_brax_raw.py``); then per seed
pgjax PPO with ``--reset-pool fixed`` (each env restarts from one state for the whole run,
as Brax's training wrapper does) and Brax's PPO trainer in its own virtual environment
(``benchmarks/.venv-brax``: jax 0.7.2 and brax 0.14.2, created on first use, since Brax's
trainer calls JAX APIs that newer JAX removed). Both trainers use identical settings: envs,
unroll length, minibatches (32), epochs (10), 64x64 tanh networks for policy and value,
lr 3e-4, gamma 0.99, lambda 0.95, clip 0.2, no entropy bonus, grad-norm clip 0.5, observation
normalisation, the same number of deterministic evaluations on
16 envs. Reported per side: steady-state training throughput (env steps/s including updates,
from the epochs after the first), compile time (first epoch minus its steady-state time),
peak memory (max RSS of the process on CPU; peak device bytes on GPU) and eval returns at
equal env steps.

Scaling (pgjax only): throughput and compile time against the number of envs and against
the number of vmapped seeds, plus the per-seed cost of vmapped seeds relative to one run.
Writes a JSON line per measurement to stdout and rewrites ``--out`` (JSON) after each one.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BRAX_VENV = HERE / ".venv-brax"
BRAX_PINS = ["jax[cpu]==0.7.2", "brax==0.14.2", "playground==0.2.0", "mujoco==3.6.0",
             "mujoco-mjx==3.6.0"]
# pgjax's DM Control sweep (experiments/sweeps/playground_dmc.toml) at Playground's settings
# scaled to 256 envs: an update of 122,880 steps (Brax: batch 128 x 32 minibatches x unroll
# 30; pgjax: 256 envs x 480 steps), 8 updates, 32 stochastic evaluation episodes at step 0
# and after every 2 updates (``evals`` of them after training starts: Brax's num_evals
# evals + 1, pgjax's --evals evals + 1)
PLAYGROUND = {"steps": 983_040, "num_envs": 256, "batch_size": 128, "minibatches": 32,
              "unroll": 30, "eval_every": 2, "eval_envs": 32, "evals": 4}


def ensure_brax_venv() -> Path:
    python = BRAX_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(BRAX_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *BRAX_PINS], check=True)
    return python


def _last_json(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON result in output:\n" + text[-3000:])


def _sub(cmd) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode:
        raise RuntimeError(f"{cmd} failed:\n{p.stderr[-3000:]}")
    return _last_json(p.stdout)


# -- the pgjax side (run as a subprocess of this file) ---------------------------------------
def pgjax_side(a) -> dict:
    import resource

    import jax

    from pgjax import TrainConfig, Trainer
    from pgjax.algos import PPOConfig
    from pgjax.loop.runner import VmappedRuns, run_keys, stack_hparams

    t_start = time.time()
    epochs = a.num_evals - 1
    iters = max(1, a.steps // (epochs * a.num_envs * a.unroll))
    cfg = TrainConfig(env=f"brax:{a.env}", num_envs=a.num_envs,
                      rollout_len=a.unroll, eval_every=iters, eval_envs=16, seeds=a.vmap_seeds,
                      seed=a.seed, steps=epochs * iters * a.num_envs * a.unroll, quiet=True,
                      reset_pool=a.reset_pool,
                      ppo=PPOConfig(minibatches=32, epochs=10, anneal_lr=False)).with_options(
        {"brax.backend": a.backend, "net.actor_hidden": tuple(a.hidden),
         "net.critic_hidden": tuple(a.hidden)})
    fns = VmappedRuns(Trainer(cfg))
    runs = cfg.runs()
    keys, ekeys = run_keys(runs)
    hps = stack_hparams(runs)
    fold = jax.jit(jax.vmap(jax.random.fold_in, (0, None)))
    t0 = time.time()
    state = jax.block_until_ready(fns.init(keys, hps))
    ev = jax.device_get(fns.evaluate(state, fold(ekeys, 0)))
    points = [{"env_steps": 0, "eval_return": float(ev["eval_return"].mean())}]
    t_first = time.time()
    epoch_times = []
    for c in range(cfg.num_chunks):
        t = time.time()
        state, _, _ = fns.chunk(state, hps, fold(ekeys, c + 1), False)  # evaluated below
        jax.block_until_ready(state)
        epoch_times.append(time.time() - t)
        ev = jax.device_get(fns.evaluate(state, fold(ekeys, c + 1)))
        points.append({"env_steps": (c + 1) * iters * cfg.batch_size,
                       "eval_return": float(ev["eval_return"].mean()),
                       "per_seed": [float(x) for x in ev["eval_return"]]})
    steps_epoch = iters * cfg.batch_size * len(runs)
    steady = steps_epoch / min(epoch_times[1:]) if len(epoch_times) > 1 else float("nan")
    out = {"side": "pgjax", "env": a.env, "seeds": len(runs), "points": points,
           "reset_pool": a.reset_pool,
           "steady_sps": steady, "compile_s": epoch_times[0] - steps_epoch / steady,
           # from building the trainer to the end of the first training epoch, less one
           # steady-state epoch: env construction and every compile (init, eval, chunk)
           "startup_s": t_first + epoch_times[0] - t_start - steps_epoch / steady,
           "total_s": time.time() - t0, "jax": jax.__version__,
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    dev = jax.devices()[0]
    if dev.platform != "cpu":
        out["peak_device_mb"] = dev.memory_stats().get("peak_bytes_in_use", 0) / 2**20
    return out


def raw_side(a) -> dict:
    from throughput import raw_stepping

    sps, compile_s = raw_stepping(f"brax:{a.env}", a.num_envs, a.unroll, 8, 3, a.backend)
    return {"side": "raw", "env": a.env, "steady_sps": sps, "compile_s": compile_s}


def brax_summary(res: dict, steps_epoch: int) -> dict:
    pts = res["points"]
    sps = [p["sps"] for p in pts[1:]]
    steady = max(sps[1:]) if len(sps) > 1 else float("nan")
    first = pts[1]["training_walltime"]
    # startup, as for pgjax: from building the env to the end of the first training epoch
    # (the initial evaluation's progress call plus the epoch's own time), less one steady
    # epoch
    startup = res["t0_after_imports_s"] + pts[0]["time_s"] + first - steps_epoch / steady
    return {"steady_sps": steady, "compile_s": first - steps_epoch / steady, "startup_s": startup,
            "points": [{"env_steps": p["env_steps"], "eval_return": p["eval_return"]} for p in pts]}


def playground(tasks: list[str], seeds: int, out: Path) -> None:
    """Brax's trainer (``_brax_playground.py``, one process per seed) and pgjax (``pgjax train
    --preset playground-dmc``, the seeds vmapped in one process) on ``playground:`` tasks at
    ``PLAYGROUND``'s settings: every process's whole wall time and each run's final return.
    Resumable: what ``out`` holds is not run again."""
    import numpy as np

    from pgjax.analysis import results as res

    g = PLAYGROUND
    if seeds < res.MIN_SEEDS:
        raise SystemExit(f"--seeds {seeds}: a verdict needs at least {res.MIN_SEEDS} seeds per "
                         f"side; pass --seeds {res.MIN_SEEDS}")
    done = json.loads(out.read_text()) if out.exists() else {}
    if done.setdefault("settings", g) != g:
        raise SystemExit(f"{out} holds runs at other settings ({done['settings']}); pass "
                         f"another --out, or move it away to start again")

    def save():  # whole or not at all: a kill mid-write leaves the previous file
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(done, indent=1))
        os.replace(tmp, out)

    runs = out.with_suffix("")  # pgjax's run directories
    brax_python = ensure_brax_venv()
    # Playground resets every training env after each update (num_resets_per_eval 10 at its
    # 60M steps: one update per reset); 2 per evaluation keeps that at this budget
    update = g["batch_size"] * g["minibatches"] * g["unroll"]  # env steps per update
    resets = g["steps"] // (g["evals"] * update)
    for task in tasks:
        row = done.setdefault(task, {"brax": {}})
        for seed in range(seeds):
            if str(seed) in row["brax"]:
                continue
            t = time.time()
            r = _sub([str(brax_python), str(HERE / "_brax_playground.py"), "--task", task,
                      "--steps", str(g["steps"]), "--num-envs", str(g["num_envs"]),
                      "--batch-size", str(g["batch_size"]), "--num-evals",
                      str(g["evals"] + 1), "--eval-envs", str(g["eval_envs"]),
                      "--resets-per-eval", str(resets), "--seed", str(seed)])
            if r["points"][-1]["env_steps"] != g["steps"]:
                raise SystemExit(f"Brax's {task} seed {seed} ended at "
                                 f"{r['points'][-1]['env_steps']:,} steps, not {g['steps']:,}")
            row["brax"][str(seed)] = {**r, "process_s": time.time() - t}
            print(json.dumps({"task": task, "side": "brax", "seed": seed,
                              "final": r["points"][-1]["eval_return"],
                              "process_s": time.time() - t}), flush=True)
            save()
        if row.get("pgjax", {}).get("seeds") != seeds:  # not run yet, or other seeds
            t = time.time()
            cmd = [sys.executable, "-m", "pgjax.cli", "train", "--preset", "playground-dmc",
                   "--env", f"playground:{task}", "--num-envs", str(g["num_envs"]),
                   "--steps", str(g["steps"]), "--eval-every", str(g["eval_every"]),
                   "--eval-envs", str(g["eval_envs"]), "--evals", str(g["evals"] + 1),
                   "--seeds", str(seeds), "--out", str(runs), "--name", task, "--quiet",
                   "--overwrite"]
            # a first run, as each Brax process is: nothing loaded from pgjax's caches
            p = subprocess.run(cmd, capture_output=True, text=True,
                               env={**os.environ, "PGJAX_COMPILE_CACHE": "off"})
            if p.returncode:
                raise RuntimeError(f"{cmd} failed:\n{p.stderr[-3000:]}")
            final = res.finals(res.load([runs / task], command="vs_brax.py"))
            if len(final) != seeds or int(final["env_steps"].max()) != g["steps"]:
                raise SystemExit(f"pgjax on {task}: {len(final)} finished runs at "
                                 f"{int(final['env_steps'].max()):,} steps, not {seeds} at "
                                 f"{g['steps']:,}")
            row["pgjax"] = {"process_s": time.time() - t, "seeds": seeds,
                            "finals": final.sort_values("seed")["final"].tolist(),
                            "env_steps": int(final["env_steps"].max())}
            save()
        mine = np.asarray(row["pgjax"]["finals"], float)
        theirs = np.asarray([row["brax"][str(i)]["points"][-1]["eval_return"]
                             for i in range(seeds)])
        try:
            v = res.verdict(mine, theirs)
            said = {"verdict": v.outcome, "difference": v.difference,
                    "difference_ci95": v.ci95}
        except res.VerdictError as e:  # e.g. a non-finite return: recorded, not raised
            said = {"verdict": f"no verdict ({e})"}
        brax_s = sum(row["brax"][str(i)]["process_s"] for i in range(seeds))
        row["summary"] = {
            "pgjax_final": mine.mean(), "pgjax_ci95": res.ci_or_range(mine),
            "brax_final": theirs.mean(), "brax_ci95": res.ci_or_range(theirs), **said,
            "pgjax_us_per_step": row["pgjax"]["process_s"] / (len(mine) * g["steps"]) * 1e6,
            "brax_us_per_step": brax_s / (len(theirs) * g["steps"]) * 1e6}
        print(json.dumps({"task": task, **row["summary"]}), flush=True)
        save()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--playground", nargs="+", metavar="TASK",
                   help="instead: Brax's trainer against pgjax on these playground: tasks "
                        "(e.g. CartpoleBalance ReacherEasy CheetahRun), --seeds each")
    p.add_argument("--envs", nargs="+", default=["ant", "hopper"])
    p.add_argument("--backend", default="generalized")
    p.add_argument("--steps", type=int, default=491_520)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--unroll", type=int, default=32)
    p.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    p.add_argument("--num-evals", type=int, default=6)
    p.add_argument("--scaling-envs", type=int, nargs="*", default=[64, 256, 1024, 4096])
    p.add_argument("--scaling-seeds", type=int, nargs="*", default=[1, 4, 8, 32])
    p.add_argument("--scaling-only", action="store_true")
    p.add_argument("--no-scaling", action="store_true")
    p.add_argument("--out", default=str(HERE / "results" / "vs_brax.json"))
    # internal: run one side in this process
    p.add_argument("--side", choices=["pgjax", "raw"], help=argparse.SUPPRESS)
    p.add_argument("--env", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--vmap-seeds", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--reset-pool", default="rollout", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.playground:
        out = Path(a.out if a.out != p.get_default("out") else
                   HERE / "results" / "playground_vs_brax.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        playground(a.playground, a.seeds, out)
        return
    if a.side:
        sys.path.insert(0, str(HERE))
        print(json.dumps(pgjax_side(a) if a.side == "pgjax" else raw_side(a)))
        return

    import jax

    results = {"machine": platform.machine(), "cpus": os.cpu_count(),
               "device": str(jax.devices()[0]), "pgjax_jax": jax.__version__,
               "settings": vars(a), "default_pool": [], "comparison": [], "scaling": []}
    me = [sys.executable, str(Path(__file__).resolve())]
    common = ["--backend", a.backend, "--num-envs", str(a.num_envs), "--unroll", str(a.unroll),
              "--num-evals", str(a.num_evals), "--steps", str(a.steps),
              "--hidden", *map(str, a.hidden)]
    steps_epoch = a.steps // (a.num_evals - 1) // (a.num_envs * a.unroll) * a.num_envs * a.unroll
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    save = lambda: out.write_text(json.dumps(results, indent=1))  # after every measurement
    if not a.scaling_only:
        brax_python = ensure_brax_venv()
        for env in a.envs:
            raw = _sub(me + ["--side", "raw", "--env", env] + common)
            # the same ceiling through Brax's own training wrapper (autoreset to the first state)
            braw = _sub([str(brax_python), str(HERE / "_brax_raw.py"), "--env", env,
                         "--backend", a.backend, "--num-envs", str(a.num_envs),
                         "--unroll", str(a.unroll)])
            # pgjax's default restarts episodes from a reset pool redrawn every rollout; Brax's
            # trainer restarts each env from its first state, which --reset-pool fixed matches
            default = _sub(me + ["--side", "pgjax", "--env", env, "--seed", "0",
                                 "--reset-pool", "rollout"] + common)
            row = {"env": env, "raw_sps": raw["steady_sps"], "raw_compile_s": raw["compile_s"],
                   "brax_raw_sps": braw["steady_sps"], "brax_raw_compile_s": braw["compile_s"],
                   "pgjax_default": default}
            results["default_pool"].append(row)
            print(json.dumps({"env": env, "raw_sps": raw["steady_sps"],
                              "brax_raw_sps": braw["steady_sps"],
                              "pgjax_default_sps": default["steady_sps"],
                              "pgjax_default_compile_s": default["compile_s"]}), flush=True)
            save()
            for seed in range(a.seeds):
                mine = _sub(me + ["--side", "pgjax", "--env", env, "--seed", str(seed),
                                  "--reset-pool", "fixed"] + common)
                theirs = _sub([str(brax_python), str(HERE / "_brax_ppo.py"), "--env", env,
                               "--seed", str(seed), "--backend", a.backend,
                               "--steps", str(a.steps), "--num-envs", str(a.num_envs),
                               "--unroll", str(a.unroll), "--num-evals", str(a.num_evals),
                               "--hidden", *map(str, a.hidden)])
                row = {"env": env, "seed": seed, "raw_sps": raw["steady_sps"],
                       "brax_raw_sps": braw["steady_sps"],
                       "pgjax": mine, "brax": {**brax_summary(theirs, steps_epoch),
                                               "peak_rss_mb": theirs["peak_rss_mb"],
                                               "jax": theirs["jax"]}}
                row["pgjax_over_brax_sps"] = mine["steady_sps"] / row["brax"]["steady_sps"]
                row["pgjax_over_raw"] = mine["steady_sps"] / raw["steady_sps"]
                print(json.dumps({k: row[k] for k in ("env", "seed", "raw_sps",
                                                      "pgjax_over_brax_sps", "pgjax_over_raw")}
                                 | {"pgjax_sps": mine["steady_sps"],
                                    "brax_sps": row["brax"]["steady_sps"],
                                    "pgjax_compile_s": mine["compile_s"],
                                    "brax_compile_s": row["brax"]["compile_s"],
                                    "pgjax_startup_s": mine["startup_s"],
                                    "brax_startup_s": row["brax"]["startup_s"],
                                    "pgjax_final": mine["points"][-1]["eval_return"],
                                    "brax_final": row["brax"]["points"][-1]["eval_return"]}),
                      flush=True)
                results["comparison"].append(row)
                save()
    if not a.no_scaling:
        env = a.envs[0]
        for n in a.scaling_envs:
            steps = 3 * 2 * n * a.unroll  # 3 epochs of 2 iterations
            r = _sub(me + ["--side", "pgjax", "--env", env, "--num-envs", str(n),
                           "--unroll", str(a.unroll), "--num-evals", "4", "--steps", str(steps),
                           "--backend", a.backend, "--hidden", *map(str, a.hidden)])
            row = {"kind": "num_envs", "env": env, "num_envs": n, "seeds": 1,
                   "steady_sps": r["steady_sps"], "compile_s": r["compile_s"],
                   "peak_rss_mb": r["peak_rss_mb"]}
            print(json.dumps(row), flush=True)
            results["scaling"].append(row)
            save()
        for s in a.scaling_seeds:
            steps = 3 * 2 * a.num_envs * a.unroll
            r = _sub(me + ["--side", "pgjax", "--env", env, "--vmap-seeds", str(s)] +
                     ["--num-envs", str(a.num_envs), "--unroll", str(a.unroll), "--num-evals",
                      "4", "--steps", str(steps), "--backend", a.backend,
                      "--hidden", *map(str, a.hidden)])
            row = {"kind": "seeds", "env": env, "num_envs": a.num_envs, "seeds": s,
                   "steady_sps": r["steady_sps"], "compile_s": r["compile_s"],
                   "peak_rss_mb": r["peak_rss_mb"]}
            print(json.dumps(row), flush=True)
            results["scaling"].append(row)
            save()


if __name__ == "__main__":
    main()
