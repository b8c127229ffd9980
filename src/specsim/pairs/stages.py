"""The stages of real pairs, one per backend: what ``specsim <stage>`` and the DAG's rule file
(workflow/rules/stages.smk) run. Importing it imports no backend's heavy code: a step's
function is imported when it runs."""

from __future__ import annotations

from specsim.pairs.llm.steps import STAGE as LLM
from specsim.pairs.realtext.steps import STAGE as REALTEXT

STAGES = (REALTEXT, LLM)
