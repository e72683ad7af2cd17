"""What probes compute with: rows, prefix forking and batching shared by every probe (`rows`),
paired scoring of jobs (`paired`), fact-pair planning (`fact_pairs`), truncated-context sweeps
(`sweep`), and summaries (bins, by-reach, the run's own checks)."""
