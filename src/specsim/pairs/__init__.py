"""A real draft/target pair's analyses, written once for every backend: predicted vs measured
tokens per call (:mod:`.accept`), the cost-model speedup (:mod:`.speedup`) and the lossless
G-test rows (:mod:`.lossless`). Nothing here imports a backend (``specsim.realtext``,
``specsim.llm``): they call these with their traces, runs and counts."""
