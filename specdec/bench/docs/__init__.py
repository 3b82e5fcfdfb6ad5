"""The docs' build: every measured figure in docs/*.md and README.md written from docs/results
(``python -m specdec.bench.docs.figures --check`` / ``--write``), with its tables (``tables``),
README's bench figures (``readme_bench``) and the optimal-k table (``theory_table``)."""
