"""The glue that wires synth streams and the recall evaluation into txl's training loop: presets
(the shipped recipe), the synth stream from a config's `data` table, the recall-by-distance
evaluation, running `probe train`'s job, and the comparison of two runs."""
