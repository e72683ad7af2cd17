"""fact-rebind separates keyed lookup from copying: a planted model that only copies "a token
seen in its visible context" pays nothing when the value stays in the text bound to another
entity (keyed lookup exactly 0) and pays the copy term when the value is gone."""

import probes
from probes.adapters.planted import PlantedModel


def test_a_pure_copier_has_no_keyed_lookup_and_all_of_its_effect_is_copy(tmp_path):
    m = PlantedModel(tgt_len=16, mem_len=16, n_layer=1, noise="token", copy=2.0, sigma=0.1)
    s = probes.run(
        "fact-rebind", model=m, distance="8-20", n=8, out=tmp_path, progress=False, threads=1
    )
    e = s.metrics["effects"]["all"]
    assert e["keyed_lookup"]["mean"] == 0.0 and e["keyed_lookup"]["ci95"] == [0.0, 0.0]
    assert e["copy"]["mean"] > 1.0 and e["copy"]["ci95"][0] > 0  # delete − rebind, per base
    assert e["copy"]["n"] == e["keyed_lookup"]["n"] == 8
    rebind = [b for b in s.bins if b["variant"] == "rebind"]
    assert all(b["verdict"] == "negligible" for b in rebind)
    assert s.verdict.startswith("fact-rebind: negligible")
    assert s.passed


def test_rebind_delete_and_swap_share_one_base_per_pair(tmp_path):
    m = PlantedModel(tgt_len=16, mem_len=16, n_layer=1, copy=2.0)
    s = probes.run("fact-rebind", model=m, distance="8-20", n=4, out=tmp_path, progress=False)
    from probes.framework.results import load_samples

    recs = load_samples(s.run_dir)
    by_base = {}
    for r in recs:
        by_base.setdefault(r["base"], set()).add(r["variant"])
    assert len(by_base) == 4 and all(v == {"rebind", "delete", "swap"} for v in by_base.values())
