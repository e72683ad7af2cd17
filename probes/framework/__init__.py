"""The run framework: what a probe is (`probe`), how it is found (`registry`), its parameters
(`params`) and the run options every probe shares (`options`), the runner that turns options into
a run directory (`runner`, `models`, `results`, `provenance`, `summary`) and `rerun`. The
diagnose suite, which runs several probes through it, is `probes.suite`."""
