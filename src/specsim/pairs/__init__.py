"""The pair stage: a real draft/target pair measured and predicted, whatever the models are.

A *pair* is a target model and a draft model over one vocabulary. What the stage needs from
them is written once, as a protocol (:class:`.backend.PairBackend`): both models' next-token
rows at a batch of contexts, one speculative round over a batch of chains returning counts,
and one target call verifying k positions and one draft step as callables to time. Two
backends implement it: character n-grams (:mod:`.realtext.backend`, the default DAG) and
transformers (:mod:`.llm.backend`, the opt-in ``llm`` extra). The measurements built on it
(:mod:`.measure`: speculative generation from a trace's prompts, counted per prompt) run on
either backend.

The backends are this package's two subpackages, :mod:`.realtext` and :mod:`.llm`; the modules
at this level import neither (a backend is passed in). This ``__init__`` imports nothing.
"""
