"""One run as a program: the typed config and its options and presets, policy kinds, the
rollout, the parts built from the config and the ``Trainer``."""
