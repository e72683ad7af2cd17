"""The glue that wires synth streams and the recall evaluation into txl's training loop: presets
(the shipped recipe), the recall-by-distance evaluation, and the comparison of two runs."""
