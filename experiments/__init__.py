"""One-off measurements (A/B trials, profiles, traces) and the script that writes docs' figures.

Not installed (``pip install .`` ships only ``specdec``); run from a checkout, e.g.
``python -m experiments.step_rows``. Their results are recorded in docs/ and docs/log/.
"""
