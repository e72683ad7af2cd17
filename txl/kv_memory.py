"""The evaluation memory that carries keys and values: per layer, the projected K and V of the
cached positions instead of the hidden states they are projected from.

Why it is the same computation (docs/design.md, *Keys and values at evaluation*): with "rel" and
"shaw" a cached position's key is K = W_k,E · x, x the layer input (pre-LN: its LayerNorm) of that
position, and its value V = W_v · x — nothing in either depends on where the position sits in the
window that reads it: the position term of a score depends on the distance only, and is computed
from the query side and the distance (W_R r_{i−j}, Shaw's tables). So projecting x once, when its
segment runs, and reusing K and V for every later segment gives the keys the hidden-state memory
would re-project each time — up to the rounding of a matmul of another shape. With "abs" and
"learned" the window-relative position of a cached position is added to x at each use (it moves
as the window moves), so the key of the same position differs per segment: nothing to cache.
Those keep the hidden-state memory (`resolve_cache` says so, with the reason).

Without gradients only: training keeps txl.memory.Memory (the weights change every step, and the
stop-gradient is defined on the states).

`keys[l]`, `values[l]`: (n_head, B, M, d_head), heads first as txl.attention lays them out;
`doc_ids`: (B, M) long, −1 = padding. It can be forked (`select`), moved (`to`) and cut
(`truncate`) like the hidden-state memory. A segment's keys and values are appended after the
window in a store with room to grow (`extend`), so a stream copies its memory once every few
segments rather than concatenating it anew in every layer of every segment.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from txl.attention import shift_columns
from txl.memory import CachedPositions

CACHES = ("kv", "hidden")
EXACT_KV = ("rel", "shaw")  # position encodings whose cached keys do not move with the window


def resolve_cache(requested: str, pos_enc: str) -> tuple[str, str]:
    """("kv" | "hidden", why) for a request of "auto", "kv" or "hidden" and a model's pos_enc.

    "auto" takes "kv" where it is exact and "hidden" where it is not; "kv" where it is not exact is
    a ValueError (one line) rather than a silent change of what was asked for."""
    if requested not in ("auto", *CACHES):
        raise ValueError(f"cache {requested!r}: use auto, kv or hidden")
    if requested == "hidden":
        return "hidden", "asked for"
    if pos_enc in EXACT_KV:
        return "kv", "keys and values do not depend on the window (relative positions)"
    why = (
        f"pos_enc {pos_enc!r} adds window-relative positions to the memory at each use, so its "
        "keys change from segment to segment"
    )
    if requested == "kv":
        raise ValueError(f"cache 'kv' is not exact for {why}; use cache 'hidden' or 'auto'")
    return "hidden", why


# Segments of space a store keeps after [memory; segment] (`KVMemory.extend`, `select`): a
# stream then copies its memory once per this many segments instead of once per segment.
ROOM_SEGMENTS = 8


class _Store:
    """One layer's keys and values with room to grow, (H, B, C, D) each: memories are windows
    [offset, offset + M) of it. `used` is the end of what has been written; a window that ends
    there may append in place, and nothing is ever written below it — so every window stays
    valid, whoever appends after it (a second continuation of one memory copies instead)."""

    __slots__ = ("keys", "used", "values")

    def __init__(self, keys: Tensor, values: Tensor, used: int) -> None:
        self.keys, self.values, self.used = keys, values, used


@dataclass
class Extended:
    """[memory; segment] of one layer, as `KVMemory.extend` returns it."""

    keys: Tensor  # (H, B, M + T, D), a view of `store`
    values: Tensor
    store: _Store
    offset: int  # where `keys` starts in the store


@dataclass
class KVMemory(CachedPositions):
    keys: tuple[Tensor, ...]  # n_layer × (H, B, M, D)
    values: tuple[Tensor, ...]  # n_layer × (H, B, M, D)
    doc_ids: Tensor  # (B, M) long
    # where each layer's keys and values live (None: nowhere to append, the first extend copies)
    stores: tuple[_Store | None, ...] | None = None
    offsets: tuple[int, ...] | None = None

    @classmethod
    def empty(
        cls,
        n_layer: int,
        batch: int,
        n_head: int,
        d_head: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> KVMemory:
        """M = 0 at every layer."""

        def zeros() -> tuple[Tensor, ...]:
            shape = (n_head, batch, 0, d_head)
            return tuple(torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layer))

        return cls(zeros(), zeros(), torch.zeros(batch, 0, dtype=torch.long, device=device))

    @classmethod
    def of(cls, layers: list[Extended], doc_ids: Tensor, start: int) -> KVMemory:
        """The memory a forward leaves: each layer's [memory; segment] from position `start`."""
        return cls(
            tuple(e.keys[:, :, start:] for e in layers),
            tuple(e.values[:, :, start:] for e in layers),
            doc_ids[:, start:],
            tuple(e.store for e in layers),
            tuple(e.offset + start for e in layers),
        )

    @property
    def n_layer(self) -> int:
        return len(self.keys)

    def extend(self, layer: int, keys: Tensor, values: Tensor, room: int) -> Extended:
        """[this memory; keys] of `layer` (keys, values (H, B, T, D), the segment's), written
        after the memory's window in its store when nothing has been written there since;
        otherwise copied into a new store with space for `room` more positions. Appending
        segment after segment then copies the memory once per `room` positions instead of once
        per segment (what `torch.cat` would)."""
        M, T = self.length, keys.shape[2]
        store = self.stores[layer] if self.stores is not None else None
        a = self.offsets[layer] if self.offsets is not None else 0
        if (
            store is not None
            and store.used == a + M
            and a + M + T <= store.keys.shape[2]
            and store.keys.dtype == keys.dtype
            and store.keys.device == keys.device
        ):
            store.keys[:, :, a + M : a + M + T] = keys
            store.values[:, :, a + M : a + M + T] = values
            store.used = a + M + T
        else:
            H, B, _, D = keys.shape
            shape = (H, B, M + T + max(room, 0), D)
            store = _Store(keys.new_empty(shape), values.new_empty(shape), M + T)
            for buf, mem, seg in ((store.keys, self.keys[layer], keys),
                                  (store.values, self.values[layer], values)):  # fmt: skip
                buf[:, :, :M] = mem
                buf[:, :, M : M + T] = seg
            a = 0
        end = a + M + T
        return Extended(store.keys[:, :, a:end], store.values[:, :, a:end], store, a)

    def _from(self, start: int) -> KVMemory:
        return KVMemory(
            tuple(k[:, :, start:] for k in self.keys),
            tuple(v[:, :, start:] for v in self.values),
            self.doc_ids[:, start:],
            self.stores,
            None if self.offsets is None else tuple(o + start for o in self.offsets),
        )

    def select(self, index: Tensor, room: int = 0) -> KVMemory:
        """Rows `index` (B',) long, e.g. to fork a shared prefix into several continuations.
        room > 0: the rows are gathered into new stores with space for `room` more positions, so
        the next segments append in place (`extend`) instead of copying the memory once more."""
        index = torch.as_tensor(index, dtype=torch.long, device=self.doc_ids.device)
        doc_ids = self.doc_ids.index_select(0, index)
        if room <= 0:

            def rows(ts: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
                return tuple(t.index_select(1, index.to(t.device)) for t in ts)

            return KVMemory(rows(self.keys), rows(self.values), doc_ids)
        M = self.length
        stores = []
        for k, v in zip(self.keys, self.values, strict=True):
            H, _, _, D = k.shape
            shape = (H, len(index), M + room, D)
            store = _Store(k.new_empty(shape), v.new_empty(shape), M)
            i = index.to(k.device)
            torch.index_select(k, 1, i, out=store.keys[:, :, :M])
            torch.index_select(v, 1, i, out=store.values[:, :, :M])
            stores.append(store)
        return KVMemory(
            tuple(st.keys[:, :, :M] for st in stores),
            tuple(st.values[:, :, :M] for st in stores),
            doc_ids,
            tuple(stores),
            (0,) * len(stores),
        )

    def to(
        self, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> KVMemory:
        """Move to a device and/or cast keys and values to a dtype (doc ids stay long); itself
        when it is there already (and so still appends in place)."""
        k = self.keys[0] if self.keys else None
        same_device = device is None or (k is not None and k.device == torch.device(device))
        if k is not None and same_device and (dtype is None or k.dtype == dtype):
            return self
        return KVMemory(
            tuple(k.to(device=device, dtype=dtype) for k in self.keys),
            tuple(v.to(device=device, dtype=dtype) for v in self.values),
            self.doc_ids.to(device=device),
        )

    def nbytes(self) -> int:
        """Bytes held by the cached keys, values and doc ids (the windows, not the room to
        grow)."""
        ts = (*self.keys, *self.values, self.doc_ids)
        return sum(t.numel() * t.element_size() for t in ts)


class PositionKeys:
    """The position side of a "rel" score, W_R r_d, per layer: computed once for distances
    d = 0 … n − 1 and reused by every segment (the hidden-state path recomputes it per layer and
    segment). Row d depends on d only, not on the geometry, so one table serves every geometry
    of an evaluation; it is rebuilt larger when a forward needs a longer distance. The rows one
    window of keys reads, laid out for its position grid (H, D, K+1), are kept for the last
    window size per layer: once the memory is full every segment has the same one.

    Only valid while the weights stay as they are: build one per evaluation call, never keep it
    across training steps."""

    def __init__(self) -> None:
        self._keys: dict[int, Tensor] = {}  # layer index → (n, H·D)
        self._grid: dict[int, tuple[tuple[int, int], Tensor]] = {}  # layer → ((K, limit), grid)

    def get(self, layer: int, attn, n: int, sinusoid) -> Tensor:
        """(≥ n, H·D): W_R r_d of layer `layer` (its attention `attn`) for d = 0 … n − 1 at least;
        `sinusoid(n)` gives r_0 … r_{n−1} (n, d_model)."""
        have = self._keys.get(layer)
        if have is None or have.shape[0] < n:
            have = attn.r_proj(sinusoid(n))  # (n, H·D)
            self._keys[layer] = have
        return have

    def grid(self, layer: int, attn, n: int, sinusoid, rel_dist: Tensor, limit: int) -> Tensor:
        """(H, D, K+1) contiguous: the rows of `get(...)` at the grid's columns for a window of
        K keys (rel_dist (T, K), distances capped at `limit`; txl.attention.shift_columns)."""

        key = (rel_dist.shape[1], limit)
        kept = self._grid.get(layer)
        if kept is None or kept[0] != key:
            cols = shift_columns(rel_dist)  # depends on K and limit only
            rows = self.get(layer, attn, n, sinusoid)[cols]  # (K+1, H·D)
            grid = rows.view(len(cols), attn.n_head, attn.d_head).permute(1, 2, 0).contiguous()
            kept = (key, grid)
            self._grid[layer] = kept
        return kept[1]
