"""The learner's model: distributions, networks (and the ``Parts`` record of actor and critic),
observation and reward normalisation, GAE, and policy kinds as values."""
