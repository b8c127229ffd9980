"""specsim: speculative decoding, simulated exactly and at scale.

Leviathan et al. 2022 (arXiv 2211.17192); Chen et al. 2023 (arXiv 2302.01318).

``specsim.verify(p, q, draft_tokens, rule, rng=...)`` verifies drafted tokens against your own
target and draft probabilities (one round of Leviathan's Algorithm 1, batched); the rest of the
package (engine, exact theory, experiments) is imported from its modules.
"""

from specsim.verify import VerifyResult, verify

__version__ = "0.1.0"
__all__ = ["VerifyResult", "__version__", "verify"]
