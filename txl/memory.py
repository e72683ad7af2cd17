"""The Transformer-XL memory: explicit data passed into `forward` and returned from it.

`states[l]` is the INPUT of layer l for the last M positions (states[0] is the embedding output,
before any absolute position encoding), detached: the stop-gradient SG(·) of Dai et al. §3.2.
`doc_ids[b, m]` is the document id of cached position m (−1 = padding, never attended), so that
document reset stays exact across segment boundaries.

Never hidden module state: the caller owns it, can fork it (`select`), move it (`to`) and pass it to
another geometry (`truncate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


class CachedPositions:
    """What every memory is: M cached positions per row, with their doc ids (B, M). Each kind
    says how to keep its positions from `start` on (`_from`); cutting to a geometry's mem_len is
    then the same for all."""

    doc_ids: Tensor  # (B, M) long

    @property
    def length(self) -> int:
        """M, the number of cached positions (the same at every layer)."""
        return self.doc_ids.shape[1]

    @property
    def batch_size(self) -> int:
        return self.doc_ids.shape[0]

    def truncate(self, mem_len: int):
        """The last `mem_len` positions (all of them if there are fewer)."""
        if self.length <= mem_len:
            return self
        return self._from(self.length - mem_len)

    def _from(self, start: int):
        raise NotImplementedError


@dataclass
class Memory(CachedPositions):
    states: tuple[Tensor, ...]  # n_layer × (B, M, d_model), detached; states[l] = input of layer l
    doc_ids: Tensor  # (B, M) long

    @classmethod
    def empty(
        cls,
        n_layer: int,
        batch: int,
        d_model: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> Memory:
        """M = 0 at every layer."""
        states = tuple(
            torch.zeros(batch, 0, d_model, device=device, dtype=dtype) for _ in range(n_layer)
        )
        return cls(states, torch.zeros(batch, 0, dtype=torch.long, device=device))

    @property
    def n_layer(self) -> int:
        return len(self.states)

    def update(self, hiddens: Sequence[Tensor], doc_ids: Tensor, mem_len: int) -> Memory:
        """Append a segment and keep the last `mem_len` positions, detached.

        hiddens: n_layer × (B, T, d), the input of each layer for the segment; doc_ids: (B, T).
        mem_len 0 gives an empty memory.
        """
        if len(hiddens) != len(self.states):
            raise ValueError(f"memory has {len(self.states)} layers, got {len(hiddens)} hiddens")
        with torch.no_grad():
            start = max(0, self.length + doc_ids.shape[1] - mem_len)
            states = tuple(
                torch.cat([m.to(h.dtype), h], dim=1)[:, start:].detach()  # (B, ≤mem_len, d)
                for m, h in zip(self.states, hiddens, strict=True)
            )
            ids = torch.cat([self.doc_ids, doc_ids.to(self.doc_ids.device)], dim=1)[:, start:]
        return Memory(states, ids)

    def _from(self, start: int) -> Memory:
        return Memory(tuple(s[:, start:] for s in self.states), self.doc_ids[:, start:])

    def select(self, index: Tensor) -> Memory:
        """Rows `index` (B',) long, e.g. to fork a shared prefix into several continuations."""
        index = torch.as_tensor(index, dtype=torch.long, device=self.doc_ids.device)
        return Memory(
            tuple(s.index_select(0, index.to(s.device)) for s in self.states),
            self.doc_ids.index_select(0, index),
        )

    def to(
        self, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> Memory:
        """Move to a device and/or cast the states to a dtype (doc ids stay long)."""
        return Memory(
            tuple(s.to(device=device, dtype=dtype) for s in self.states),
            self.doc_ids.to(device=device),
        )
