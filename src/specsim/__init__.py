"""specsim: speculative decoding, simulated exactly and at scale.

Leviathan et al. 2022 (arXiv 2211.17192); Chen et al. 2023 (arXiv 2302.01318).
"""

__version__ = "0.1.0"
