"""``pgjax render`` for gymnax tasks: an episode's states drawn by gymnax's visualiser."""
from __future__ import annotations

import numpy as np

from pgjax.tools.episodes import MAX_FPS, episode
from pgjax.tools.trained import TrainedPolicy


def gymnax_episode(policy: TrainedPolicy, width: int, height: int, seed: int = 0,
                   stochastic: bool = False, max_steps: int | None = None, *,
                   fps: int | None = None):
    """(RGB frames of one episode of a gymnax task, its return, frames per second): the
    episode stepped as in training, each state drawn by gymnax's ``Visualizer`` (classic
    control through Gymnasium's pygame renderer, MinAtar, Catch, mazes, PointRobot) at its
    own frame rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from gymnax.visualize import Visualizer

    from pgjax.envs.gymnax_env import drawable, simulator

    name = policy.cfg.env.partition(":")[2]
    drawable(name)
    raw, params, _ = simulator(name)
    _, states, total = episode(policy, None, lambda s: s.sim[0], seed, stochastic, max_steps)
    vis = Visualizer(raw, params, states)
    vis.fig.set_dpi(100)
    vis.fig.set_size_inches(width / 100, height / 100)
    frames = []
    try:
        vis.init()
        for i in range(len(states)):
            vis.update(i)
            vis.fig.canvas.draw()
            frames.append(np.asarray(vis.fig.canvas.buffer_rgba())[..., :3].copy())
    finally:
        plt.close(vis.fig)
    return frames, total, fps or min(MAX_FPS, 1000 // vis.interval)
