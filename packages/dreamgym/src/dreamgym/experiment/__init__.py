"""``dreamgym experiment``: the paper's Table 1 and Table 2 on the real environments here.

- :mod:`dreamgym.experiment.config` — rows, presets (``small``, ``full``) and the config;
- :mod:`dreamgym.experiment.tables` — pure aggregation (pooled Wilson intervals, per-seed
  rates, costs, the headline claims) and the markdown report;
- :mod:`dreamgym.experiment.plots` — success vs real interactions, training curves;
- :mod:`dreamgym.experiment.runner` — drives the services (one local stack per environment).
"""

from dreamgym.experiment.config import PRESETS, ROWS, ExperimentConfig, RowSpec, preset

__all__ = ["PRESETS", "ROWS", "ExperimentConfig", "RowSpec", "preset"]
