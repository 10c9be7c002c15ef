"""What runs are used for, beyond training one: sweeps of groups (``sweep``), evaluation and
``load_policy`` (``trained``), rendering (``render``) and plots (``plotting``)."""
