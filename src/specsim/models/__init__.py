"""Target/draft model pairs as explicit probability tables, one module per idea.

* :mod:`~specsim.models.maths` -- table maths: the program's ``random_table``, ``blend``,
  ``temper``, ``softmax``, the α-calibrated draft (``calibrate``), ``overlap``;
* :mod:`~specsim.models.files` -- user table files (.npy/.csv): reading, checking, digests;
* :mod:`~specsim.models.spec` -- :class:`~specsim.models.spec.ModelSpec`, one validated
  ``models:`` entry, and the table pair of a table model at a temperature and α;
* :mod:`~specsim.models.iid` -- the notebook's stub: fresh (p, q) pairs and their frozen form.

The families (:mod:`specsim.families`) read entries into specs and give each its identity;
nothing here imports them.
"""
