"""Agent recipes built on smolagents (the HF ecosystem's agent library).

* :mod:`hfx.agents.heavy` -- Heavy test-time scaling for search agents with asymmetric verification (arXiv 2510.06135):
  a tool-budgeted ``solve``, budget forcing for agents, K parallel trajectories checked by a verifier agent, selectors,
  an offline search environment and per-question cost accounting.
"""

from hfx._lazy import attach


__getattr__, __dir__ = attach(__name__, {}, ["heavy"], submodules=("heavy",))
