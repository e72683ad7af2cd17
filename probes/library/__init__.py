"""The probes, one file each. A probe declares what it measures, its table columns, plots and
`probe diagnose` rows; the framework finds it here by its `@probe(...)` decorator."""
