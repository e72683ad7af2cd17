"""Child process of tests/test_adapters_hf_exact.py: the transformers adapters' exact guarantees
at the thread count its parent sets (OMP_NUM_THREADS, also applied with torch.set_num_threads so
that more threads than cores really run). Each guarantee compares rows at different batch
indices, among unrelated rows, since a multi-threaded matrix product may round a row by where
it sits. Prints one line per failure and exits 1 on any."""

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from token_rows import rows

from probes.adapters import hf_load
from probes.testing import RECURRENT_FAMILIES
from txl.geometry import Geometry

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
root = sys.argv[1]
V = int(sys.argv[2])
failures = []


def geo(mem, tgt, reset=True):
    return Geometry(tgt_len=tgt, mem_len=mem, clamp_len=None, reset=reset)


def expect(ok, what):
    if not ok:
        failures.append(what)


rng = np.random.default_rng(0)
for family in sys.argv[3].split(","):
    recurrent = family in RECURRENT_FAMILIES
    for evaluator in ("state", "window") if recurrent else ("full", "window", "stream", "sinks"):
        m = hf_load.load(os.path.join(root, family), evaluator=evaluator)
        name = f"{family}/{evaluator}"
        b = 21
        tokens, docs, scored = rows(n=44, b=1, boundary=b)
        noise = rng.integers(0, V, (3, 44))
        for reset in (True, False):
            g = geo(12, 5, reset)
            # an identical pair at rows 0 and 3, two unrelated rows between
            batch = np.concatenate([tokens, noise[:2], tokens])
            x = m.score(batch, np.repeat(docs, 4, 0), np.repeat(scored, 4, 0), g)
            expect(np.array_equal(x.nll[0], x.nll[3], equal_nan=True), f"{name} identical pair")
        # under reset, B (targets b + 1 …) does not depend on A's content
        other = tokens.copy()
        other[0, 1:b] = rng.integers(0, V, b - 1)
        batch = np.concatenate([tokens, noise[:1], other])
        x = m.score(batch, np.repeat(docs, 3, 0), np.repeat(scored, 3, 0), geo(12, 5))
        expect(np.array_equal(x.nll[0, b + 1 :], x.nll[2, b + 1 :]), f"{name} reset")
        # a token one past the reach changes nothing
        g = geo(10, 6, reset=False)
        t = 60
        direct, reach = m.horizon(g).token(t)
        if reach < t - 5:
            tok, dc, _ = rows(n=t + 1, b=1, seed=3)
            sc = np.zeros_like(dc, dtype=bool)
            sc[0, t] = True
            far = tok.copy()
            far[0, t - reach - 1] = (far[0, t - reach - 1] + 1) % V
            filler = rng.integers(0, V, (2, t + 1))
            batch = np.concatenate([tok, filler, far])
            x = m.score(batch, np.repeat(dc, 4, 0), np.repeat(sc, 4, 0), g)
            expect(x.nll[0, t] == x.nll[3, t], f"{name} reach + 1")
        # forked rows score what unforked ones do, bit for bit (full: within rounding, since a
        # row forwarded in pieces rounds differently; its exact guarantee is base against
        # variant, below)
        shared = getattr(m, "score_shared", None)
        if shared is not None and evaluator == "full":
            v, w = tokens.copy(), tokens.copy()
            v[0, 5] = (v[0, 5] + 1) % V  # an edit in A
            w[0, 35] = (w[0, 35] + 1) % V  # a second variant of the same base, forking later
            batch = np.concatenate([tokens, v, w, noise[:1]])
            d4, s4 = np.repeat(docs, 4, 0), np.repeat(scored, 4, 0)
            g = geo(12, 5)
            plain = m.score(batch, d4, s4, g)
            forked = shared(batch, d4, s4, g, parent=np.array([-1, 0, 0, -1]),
                            shared=np.array([0, 5, 35, 0]))  # fmt: skip
            expect(np.allclose(plain.nll, forked.nll, atol=1e-5, equal_nan=True), f"{name} fork")
            expect(np.array_equal(forked.nll[0, b + 1 :], forked.nll[1, b + 1 :]),
                   f"{name} fork: B blind to A's edit")  # fmt: skip
            # units of one shape forwarded together (hf_lockstep), padded to each other's
            # lengths: an identical variant scores its base's numbers, and a twin related with
            # nothing shared (A's content replaced) scores B as its row does under reset
            twin = tokens.copy()
            twin[0, 1:b] = rng.integers(0, V, b - 1)
            lone = np.concatenate([tokens, tokens, noise[:1], noise[:1], tokens, twin,
                                   noise[1:2], noise[1:2]])  # fmt: skip
            lone[3, 20] = (lone[3, 20] + 1) % V
            lone[7, 1:b] = rng.integers(0, V, b - 1)
            d8, s8 = np.repeat(docs, 8, 0), np.repeat(scored, 8, 0)
            d8[2:4, 39:], s8[2:4, 39:] = -1, False  # a shorter unit
            d8[6:8, 33:], s8[6:8, 33:] = -1, False
            x = shared(lone, d8, s8, g, parent=np.array([-1, 0, -1, 2, -1, 4, -1, 6]),
                       shared=np.array([0, 10, 0, 15, 0, 0, 0, 0]))  # fmt: skip
            expect(np.array_equal(x.nll[0], x.nll[1], equal_nan=True), f"{name} lockstep identical")
            expect(np.array_equal(x.nll[4, b + 1 :], x.nll[5, b + 1 :]), f"{name} lockstep twin")
            expect(np.allclose(x.nll, m.score(lone, d8, s8, g).nll, atol=1e-5, equal_nan=True),
                   f"{name} lockstep equals score")  # fmt: skip
            # six fact-swap units (base; variant, forked or related with nothing shared; each
            # with another answer token), each variant identical to its base, of six lengths:
            # their 1-token answer pieces go six to a forward, where at 2 threads a row's
            # rounding depends on its index (a matrix product's remainder rows), so base and
            # variant must share theirs
            lengths = (44, 40, 36, 41, 30, 38)
            t6, d6, s6, parents, fork = [], [], [], [], []
            for u, n in enumerate(lengths):
                text = rng.integers(0, V, 44)
                alt = text.copy()
                alt[n - 1] = (alt[n - 1] + 1) % V
                doc = np.where(np.arange(44) < n, 0, -1)
                answer = np.arange(44) == n - 1
                for row, up, at, sc in (
                    (text, -1, 0, np.arange(44) >= 12),
                    (text, 4 * u, 10 * (u % 2), None),
                    (alt, 4 * u, n - 1, answer),
                    (alt, 4 * u + 1, n - 1, answer),
                ):
                    t6.append(row)
                    d6.append(doc)
                    s6.append((np.arange(44) >= 12) & (doc >= 0) if sc is None else sc & (doc >= 0))
                    parents.append(up)
                    fork.append(at)
            x = shared(np.stack(t6), np.stack(d6), np.stack(s6), g, parent=np.array(parents),
                       shared=np.array(fork))  # fmt: skip
            for u in range(6):
                expect(np.array_equal(x.nll[4 * u], x.nll[4 * u + 1], equal_nan=True)
                       and np.array_equal(x.nll[4 * u + 2], x.nll[4 * u + 3], equal_nan=True),
                       f"{name} lockstep unit {u}: an identical variant scores its base")  # fmt: skip
        elif shared is not None:
            edited = tokens.copy()
            edited[0, 30:] = rng.integers(0, V, 14)
            batch = np.concatenate([tokens, edited, noise[:1]])
            d3, s3 = np.repeat(docs, 3, 0), np.repeat(scored, 3, 0)
            g = geo(12, 5)
            plain = m.score(batch, d3, s3, g)
            forked = shared(batch, d3, s3, g, parent=np.array([-1, 0, -1]),
                            shared=np.array([0, 30, 0]))  # fmt: skip
            expect(np.array_equal(plain.nll, forked.nll, equal_nan=True), f"{name} fork")
for f in failures:
    print("FAILED", f)
print(f"threads {torch.get_num_threads()}: {len(failures)} failures")
sys.exit(1 if failures else 0)
