"""Synthetic language with facts, controlled edits and alignment. numpy and the standard library only."""
