"""tying.plan.references: the three kinds of model reference, built from a config's mapping, and what each answers."""

from tying.plan.references import Hub, Local, Trained, reference

CONFIG = {
    "train": {"steps": 6, "checkpoints": [6, 0, 3]},
    "architectures": {"olmo": {}, "cell": {"train": {"steps": 4, "checkpoints": [0, 4]}}},
}


def test_a_mapping_is_one_kind_by_its_keys():
    assert reference({"arch": "olmo", "variant": "tied"}) == Trained("olmo", "tied")
    assert reference({"hub": "org/m"}) == Hub("org/m", "main")
    assert reference({"path": "/m", "tokenizer": "/t"}) == Local("/m", "/t")
    kinds = [(r.trained, r.hub, r.local) for r in (Trained("a", "v"), Hub("o/m"), Local("/m"))]
    assert kinds == [(True, False, False), (False, True, False), (False, False, True)]


def test_each_kind_says_its_directory_at_a_seed_and_step_and_where_a_lens_reads_its_tokens():
    run, hub, local = Trained("olmo", "tied"), Hub("org/m", "abc"), Local("/models/m", "/models/tok")
    assert run.directory(2, 300) == "results/checkpoints/olmo/tied/seed2/step300"
    assert hub.directory(2, 300) == "results/hub/embeddings/org/m/abc"
    assert hub.directory(0, 0, full=True) == "results/hub/full/org/m/abc"
    assert local.directory(2, 300, full=True) == "/models/m"
    assert run.tokens_source() is None and hub.tokens_source() == {"repo": "org/m", "revision": "abc"}
    assert local.tokens_source() == {"dir": "models/tok"} and Local("/m").tokens_source() == {"dir": "m"}
    assert run.as_variant("tied_x5").directory(0, 6) == "results/checkpoints/olmo/tied_x5/seed0/step6"
    assert run.control(1, 6, "input") == "results/controls/olmo/tied/seed1/step6/input"
    assert hub.control(0, 0, "output") == "results/survey/controls/org/m/abc/output"


def test_each_kind_says_its_evolution_its_schedule_and_its_pin():
    assert Trained("cell", "untied").evolution(CONFIG, 1) == {
        0: "results/checkpoints/cell/untied/seed1/step0",
        4: "results/checkpoints/cell/untied/seed1/step4",
    }
    assert Hub("org/m").evolution(CONFIG, 0, {"10": "s10", 2: "s2"}) == {
        2: "results/hub/embeddings/org/m/s2",
        10: "results/hub/embeddings/org/m/s10",
    }
    assert Local("/m").evolution(CONFIG, 0, {5: "/m5", 1: "/m1"}) == {1: "/m1", 5: "/m5"}
    assert Trained("olmo", "tied").schedule(CONFIG).checkpoints == (0, 3, 6)
    assert Hub("org/m").schedule(CONFIG).final == Local("/m").schedule(CONFIG).final == 6
    assert Hub("org/m", "abc").pin == ("org/m", "abc") and Trained("a", "v").pin is None and Local("/m").pin is None
    assert [r.name for r in (Trained("a", "v"), Hub("o/m"), Local("/m/x/"))] == ["a/v", "o/m@main", "/m/x/"]
    assert Local("/m/x/").label == "x" and Hub("o/m").label == "o/m"
