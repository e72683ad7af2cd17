"""`identical_prefix` compares only tokens computed for both rows. A model with `score_shared`
may give a forked row its parent's scores for the prefix the two share (the protocol allows it
before `shared`), and a copied score compared with itself checks nothing: the variant must share
only what comes before the tokens the check compares."""

from dataclasses import dataclass

import probes
from probes.adapters.planted import PlantedModel
from probes.api.model import TokenScores


@dataclass
class Forking:
    """A planted model whose forks take every shared score from their parent and compute the
    rest wrongly (+1 nat): a broken fork that only tokens computed after it can show."""

    model: PlantedModel

    def __getattr__(self, name):
        return getattr(self.model, name)

    def score_shared(self, tokens, doc_ids, positions, geometry, *, parent, shared):
        s = self.model.score(tokens, doc_ids, positions, geometry)
        nll = s.nll.copy()
        for r, (p, k) in enumerate(zip(parent, shared, strict=True)):
            if p >= 0:
                nll[r, k:] += 1.0
                nll[r, :k] = nll[p, :k]
        return TokenScores(nll, s.correct)


def test_identical_prefix_checks_tokens_the_fork_computed_itself(tmp_path):
    lm = Forking(PlantedModel(noise="token"))
    s = probes.run("fact-swap", model=lm, n=4, out=tmp_path, progress=False)
    check = s.checks["identical_prefix"]
    assert check["covered"] > 0
    assert check["status"] == "failed" and abs(check["max_abs_delta"] - 1.0) < 1e-9, check


def test_a_sound_fork_passes_the_prefix_check(tmp_path):
    lm = Forking(PlantedModel(noise="token"))
    sound = lm.model.score  # every row computed in full: nothing copied, nothing broken

    def score_shared(tokens, doc_ids, positions, geometry, *, parent, shared):
        return sound(tokens, doc_ids, positions, geometry)

    lm.__dict__["score_shared"] = score_shared
    s = probes.run("fact-swap", model=lm, n=4, out=tmp_path, progress=False)
    check = s.checks["identical_prefix"]
    assert check["status"] == "passed" and check["covered"] == 8 * s.n_pairs, check
