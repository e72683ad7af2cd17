"""`python -m probes.cli ...` (and `torchrun -m probes.cli train ...`)."""

from probes.cli.main import main

main()
