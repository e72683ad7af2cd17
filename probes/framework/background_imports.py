"""Imports a run needs only after its scoring, started in a background thread when the scoring
starts: matplotlib's figure and Agg canvas (~0.45 s; every run writes its plots) and
scipy.special (~0.13 s; the statistics' t quantiles). The scoring spends its time in torch with
the interpreter lock released, so these imports overlap it instead of following it; a module
asked for later waits on the import lock or finds it done."""

from __future__ import annotations

NEEDED_AFTER_SCORING = ("matplotlib.figure", "matplotlib.backends.backend_agg", "scipy.special")

_started: list = []  # the importing thread, once per process


def start_background_imports() -> None:
    """Start importing NEEDED_AFTER_SCORING in a daemon thread (once per process)."""
    if _started:
        return
    import importlib
    import threading

    def load() -> None:
        for name in NEEDED_AFTER_SCORING:
            try:
                importlib.import_module(name)
            except Exception:  # the import where it is needed says what failed
                return

    thread = threading.Thread(target=load, name="background-imports", daemon=True)
    _started.append(thread)
    thread.start()
