"""The diagnose suite (`probe diagnose`): every probe with a diagnose place, run on one model
(`one.diagnose`) or several side by side (`several.diagnose_models`), in one run directory.

`plan` says what runs and prepares it, `execute` runs it, `store` keeps the run directory (and
what a resumed diagnose keeps), `rows` makes the table's rows from the probe runs' summaries.
"""
