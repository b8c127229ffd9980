"""The checks table (``specsim checks``, the claims of the seeds re-tested), declared here and
gathered by :mod:`specsim.outputs`.

Kept free of pandas and matplotlib: Snakemake imports it to plan the DAG.
"""

from __future__ import annotations

from specsim.declare import Table

TABLES = (
    Table(
        "checks",
        title="Checks: every claim of the seeds, re-tested",
        about="One row per claim the two seed documents make, re-tested with proper statistics. "
              "Every row must pass: the DAG stops (rule gate), naming the claim, when one does "
              "not.",
        columns={
            "check": "the claim and where it was tested, e.g. verdict[model/γ/T/rule]",
            "source": "which seed document (program or notebook) and which of its demos or "
                      "checks made the claim",
            "passed": "whether the claim holds",
            "observed": "what the simulation and exact theory give",
            "expected": "what the claim requires",
        },
        step="checks"),
)
