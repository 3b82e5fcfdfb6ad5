"""Tools around the engine: benchmarks, the k sweep, plots, training, doc figures. They parse
arguments and write result files; ``engine/`` does neither. They may import ``engine`` and ``app``."""
