"""Empty stand-in for navix, which purejaxrl's ``wrappers.py`` imports for a wrapper the
Brax benchmark does not use (``benchmarks/vs_purejaxrl.py``)."""
