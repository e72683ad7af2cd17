"""The filler language: a first-order Markov chain over filler words, biased per topic.

Every word has a few *shared* successors (Zipf-weighted, the same in every topic) and, in each topic,
a few *topic* successors drawn from that topic's cluster of words. In topic t the next word follows

    P_t(j | i) = (1 − λ) · S(j | i) + λ · T_t(j | i)

so about a fraction λ of a document's filler comes from its topic's cluster: the topic is visible after a
few words and a longer prefix of the same document predicts better (topic adaptation). Row `n_topics`
of the tables is the topic-free chain S alone (used by the local-only corpus).

Each chain starts from its stationary distribution, so every filler token (after the first) has the
same conditional entropy given the previous filler token: `entropy_rate(t)` is exact, not estimated.
All tables are built from integer structure and exact arithmetic (no transcendental functions), so
sampling is bit-identical across machines.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from synth import rng as rnd

_U_MAX = 1.0 - 2.0**-30


def _zipf(k: int) -> np.ndarray:
    """Weights 1/1, 1/2, …, 1/k normalised (IEEE division only: identical on every machine)."""
    w = np.array([1.0 / (r + 1) for r in range(k)])
    return w / w.sum()


class FillerGrammar:
    """Markov filler over `n_words` local word indices (0..n_words-1); map them to token ids outside."""

    def __init__(
        self,
        n_words: int,
        n_topics: int,
        topic_words: int,
        shared_successors: int,
        topic_successors: int,
        topic_weight: float,
        rng: np.random.Generator,
    ):
        if n_topics * topic_words > n_words:
            raise ValueError(
                f"{n_topics} topics × {topic_words} topic words need at least "
                f"{n_topics * topic_words} filler words, got {n_words}"
            )
        if not 2 <= shared_successors <= n_words or not 1 <= topic_successors <= topic_words:
            raise ValueError(
                f"successor counts must satisfy 2 <= shared_successors ({shared_successors}) <= "
                f"n_filler and 1 <= topic_successors ({topic_successors}) <= topic_words"
            )
        if not 0.0 <= topic_weight < 1.0:
            raise ValueError(f"topic_weight must be in [0, 1), got {topic_weight}")
        n = n_words
        self.n_words, self.n_topics = n, n_topics
        self.topic_weight = float(topic_weight)

        perm = rnd.permutation(rng, n)
        self.clusters = perm[: n_topics * topic_words].reshape(n_topics, topic_words)  # (T, W)
        # A random Hamiltonian cycle among the shared successors makes every chain irreducible.
        cycle = rnd.permutation(rng, n)
        cycle_next = np.empty(n, dtype=np.int64)
        cycle_next[cycle] = np.roll(cycle, -1)
        shared = np.empty((n, shared_successors), dtype=np.int64)  # rank order: most likely first
        for i in range(n):
            others = [
                j for j in rnd.sample(rng, range(n), shared_successors + 1) if j != cycle_next[i]
            ]
            row = [int(cycle_next[i]), *others[: shared_successors - 1]]
            shared[i] = [row[k] for k in rnd.permutation(rng, shared_successors)]
        topical = np.empty((n_topics, n, topic_successors), dtype=np.int64)
        for t in range(n_topics):
            for i in range(n):
                topical[t, i] = rnd.sample(rng, self.clusters[t], topic_successors)
        self.shared, self.topical = shared, topical

        # Dense transition matrices, one per topic plus the topic-free chain S (last).
        ws, wt = _zipf(shared_successors), _zipf(topic_successors)
        S = np.zeros((n, n))
        np.add.at(S, (np.arange(n)[:, None], shared), ws[None, :])
        P = np.empty((n_topics + 1, n, n))
        for t in range(n_topics):
            Tt = np.zeros((n, n))
            np.add.at(Tt, (np.arange(n)[:, None], topical[t]), wt[None, :])
            P[t] = (1.0 - topic_weight) * S + topic_weight * Tt
        P[n_topics] = S
        self.P = P  # (T+1, n, n)
        self.stationary = np.stack([_stationary(P[t]) for t in range(n_topics + 1)])  # (T+1, n)

        # Sampling tables: row r = topic * n + word, K = most successors of any row. Entries of row r
        # sit at [r*K, (r+1)*K) of a flat array holding r + cumulative probability, monotone over the
        # whole array, so one searchsorted samples a step of many chains at once.
        K = shared_successors + topic_successors
        rows = (n_topics + 1) * n
        if rows >= 2**20:
            raise ValueError(f"(n_topics + 1) × n_filler = {rows} is too large (limit 2**20)")
        succ = np.zeros((rows, K), dtype=np.int64)
        cum = np.ones((rows, K))
        flatP = P.reshape(rows, n)
        for r in range(rows):
            nz = np.flatnonzero(flatP[r])
            succ[r, : len(nz)] = nz
            succ[r, len(nz) :] = nz[-1]
            c = np.cumsum(flatP[r, nz])
            c[-1] = 1.0
            cum[r, : len(nz)] = c
        self.K = K
        self._succ_flat = succ.reshape(-1)
        self._cum_flat = (np.arange(rows, dtype=np.float64)[:, None] + cum).reshape(-1)
        init = np.cumsum(self.stationary, axis=1)
        init[:, -1] = 1.0
        self._init_flat = (np.arange(n_topics + 1, dtype=np.float64)[:, None] + init).reshape(-1)

    # ---------------------------------------------------------------- sampling

    def _row(self, topics: np.ndarray) -> np.ndarray:
        t = np.where(topics < 0, self.n_topics, topics)
        return t.astype(np.int64) * self.n_words

    def sample(
        self, topics: np.ndarray, u: np.ndarray, prev: np.ndarray | None = None
    ) -> np.ndarray:
        """Chains of local word indices, one per row of the uniforms `u` (D, L).

        topics (D,): topic per chain (−1: the topic-free chain). prev (D,) optional: the word each chain
        continues from (−1: start from the stationary distribution). Each chain's words depend only on
        its own row of `u`, so chains can be sampled together or alone with the same result."""
        topics = np.asarray(topics, dtype=np.int64)
        # u < 1 − 2^-30 keeps r + u below r + 1 after rounding (r < 2^20 table rows)
        uT = np.minimum(np.asarray(u, dtype=np.float64).T, _U_MAX)  # (L, D): one row per step
        L, D = uT.shape
        outT = np.empty((L, D), dtype=np.int64)
        if L == 0:
            return outT.T
        base = self._row(topics)  # (D,) first table row of each chain's topic
        n = self.n_words
        tmod = base // n
        first = self._init_flat.searchsorted(tmod + uT[0], side="right")
        state = np.minimum(first - tmod * n, n - 1)
        if prev is not None:
            prev = np.asarray(prev, dtype=np.int64)
            has = prev >= 0
            if has.any():
                state = np.where(has, self._step(base, np.where(has, prev, 0), uT[0]), state)
        outT[0] = state
        cum, succ = self._cum_flat, self._succ_flat
        r = np.empty(D, dtype=np.int64)
        key = np.empty(D)
        for t in range(1, L):
            np.add(base, state, out=r)
            np.add(r, uT[t], out=key)
            state = succ.take(cum.searchsorted(key, side="right"))
            outT[t] = state
        return outT.T

    def _step(self, base: np.ndarray, state: np.ndarray, u: np.ndarray) -> np.ndarray:
        r = base + state  # (D,) table rows
        return self._succ_flat[self._cum_flat.searchsorted(r + np.minimum(u, _U_MAX), side="right")]

    def sample_uniform(self, u: np.ndarray) -> np.ndarray:
        """i.i.d. uniform filler words ("random filler"), one per uniform."""
        return np.minimum((np.asarray(u) * self.n_words).astype(np.int64), self.n_words - 1)

    # ---------------------------------------------------------------- entropy

    def entropy_rate(self, topic: int | None = None) -> float:
        """H(X_{k+1} | X_k) in nats for the stationary chain of `topic` (−1: topic-free chain).

        `topic=None`: the mean over topics, i.e. H(X_{k+1} | X_k, topic) with topics uniform — the
        per-token floor of a model that knows the document's topic (which a long prefix reveals)."""
        if topic is None:
            return float(np.mean([self.entropy_rate(t) for t in range(self.n_topics)]))
        t = self.n_topics if topic < 0 else topic
        if t > self.n_topics:
            raise ValueError(f"topic {topic} out of range (0..{self.n_topics - 1}, or -1)")
        P = self.P[t]
        with np.errstate(divide="ignore", invalid="ignore"):
            row_h = -np.where(P > 0, P * np.log(P), 0.0).sum(axis=1)
        return math.fsum(self.stationary[t] * row_h)  # exactly rounded: no BLAS dot

    def bigram_entropy(self) -> float:
        """H(X_{k+1} | X_k) in nats when the topic is unknown (uniform over topics): the floor of a
        model that sees only the previous filler word. Minus `entropy_rate()`, the most that knowing
        the topic can save per token."""
        T = self.n_topics
        joint = sum(self.stationary[t][:, None] * self.P[t] for t in range(T)) / T  # (n, n)
        cond = joint / joint.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(-np.where(joint > 0, joint * np.log(cond), 0.0).sum())

    def bayes_nll(self, words: np.ndarray) -> np.ndarray:
        """Per-word NLL (nats) of one document's filler chain under the Bayes predictor that knows the
        grammar but not the topic: a uniform prior over the topics, updated by the words so far. Its
        mean is the floor of any model reading the same prefix (above `entropy_rate()`, which knows
        the topic from the first word)."""
        w = np.asarray(words, dtype=np.int64)
        if len(w) == 0:
            return np.zeros(0)
        T = self.n_topics
        with np.errstate(divide="ignore"):
            first = np.log(self.stationary[:T, w[0]])[:, None]  # (T, 1)
            steps = np.log(self.P[:T, w[:-1], w[1:]])  # (T, len − 1)
        logp = np.concatenate([first, steps], axis=1)  # log P_t(word k | word k−1)
        prior = np.concatenate([np.zeros((T, 1)), np.cumsum(logp, axis=1)[:, :-1]], axis=1)
        return _logsumexp(prior, axis=0) - _logsumexp(prior + logp, axis=0)

    def digest(self) -> str:
        """sha256 of the integer structure (clusters, successors): detects a changed construction."""
        h = hashlib.sha256()
        for a in (self.clusters, self.shared, self.topical):
            h.update(np.ascontiguousarray(a, dtype="<i8").tobytes())
        return h.hexdigest()


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):
        return np.squeeze(m, axis) + np.log(np.exp(x - m).sum(axis=axis))


def _stationary(P: np.ndarray) -> np.ndarray:
    """The stationary distribution of an irreducible transition matrix (rows sum to 1): π solves
    (Pᵀ − I) π = 0 with its last equation replaced by Σπ = 1. Gaussian elimination with partial
    pivoting in elementwise operations only, each rounded once by IEEE arithmetic: a LAPACK solve
    takes its CPU's code path and splits by its thread count, which moves π's last bits (and the
    sampling tables built from it) from one machine to another. O(n³/3): about 30 ms at n = 200."""
    n = P.shape[0]
    M = np.empty((n, n + 1))  # [A | b]
    M[:, :n] = P.T - np.eye(n)
    M[-1, :n] = 1.0
    M[:, n] = 0.0
    M[-1, n] = 1.0
    for k in range(n):
        pivot = k + int(np.argmax(np.abs(M[k:, k])))
        if pivot != k:
            M[[k, pivot]] = M[[pivot, k]]
        factors = M[k + 1 :, k] / M[k, k]
        M[k + 1 :, k:] -= np.multiply.outer(factors, M[k, k:])
    pi = M[:, n].copy()
    for k in range(n - 1, -1, -1):  # back substitution by columns: no sums to reorder
        pi[k] /= M[k, k]
        pi[:k] -= pi[k] * M[:k, k]
    pi = np.clip(pi, 0.0, None)
    return pi / math.fsum(pi)
