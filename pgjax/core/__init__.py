"""Foundations every layer uses: errors, files written atomically, trust (keys and tags),
registries and plugin files, run-directory states, the shared argument parser, the
compilation cache, hyperparameter kinds and evaluation modes."""
