"""Verification schemes and draft-length policies beyond Algorithm 1 (see :mod:`.law`)."""
