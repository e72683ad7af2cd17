"""Presentation: rich tables of runs (`tables`), plots (`plots`) and the diagnose table. It
renders what probes declare and knows no probe by name."""
