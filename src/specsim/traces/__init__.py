"""Traces of a real draft/target pair: their file (:mod:`.format`) and the positional model
every analysis runs on them (:mod:`.positional`)."""
