"""Lab notes: one-off measurements (A/B trials, profiles, traces), kept to rerun them.

Not installed (``pip install .`` ships only ``specdec``); run from a checkout, e.g.
``python -m experiments.rows_cost``. Their results are recorded in docs/ and docs/log/. Nothing
else imports them: what a test or the docs' build needs lives in the package (the docs' figures in
specdec/bench/docs/, the measurements the tests run in specdec/bench/); tests/test_house.py holds
the count of test modules importing experiments/ at 0.
"""
