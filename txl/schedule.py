"""Learning-rate schedule: linear warmup, then cosine decay to a floor.

Used as the multiplier of `torch.optim.lr_scheduler.LambdaLR`; it is a small dataclass (not a
closure) so that the scheduler's state_dict holds plain numbers and survives `weights_only` loads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class WarmupCosine:
    warmup_steps: int
    total_steps: int
    min_ratio: float = 0.1

    def __call__(self, step: int) -> float:
        """Multiplier of the peak lr for update number `step` + 1 (`step` = updates done so far).

        Warmup: (step + 1) / warmup_steps, reaching 1 at the last warmup update. Then a half
        cosine from 1 down to `min_ratio`, reached at the last update (step = total_steps - 1;
        a run whose only post-warmup update is its last one runs it at the peak)."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        span = self.total_steps - 1 - self.warmup_steps
        progress = 0.0 if span <= 0 else min(1.0, (step - self.warmup_steps) / span)
        return self.min_ratio + (1.0 - self.min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
