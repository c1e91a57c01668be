"""The README and docs/ name only things that exist: every relative link resolves (its #anchor to a
heading of the target page), and every repository path written in backticks exists.

Build outputs (.gitignore's paths: results/, figures/, logs/, runs/, benchmarks/out/, ...), paths
outside the checkout (`../other/...`, `~/...`, `/path/...`) and placeholders (`{arch}`, `<pair>`,
`...`) are not checked.
"""

import fnmatch
import re
from pathlib import Path

import yaml
from snakerun import cli, planned_jobs

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Top-level folders a path inside the repository starts with (besides those present now), so that a
# path into a folder that was renamed away is still checked.
REPO_FOLDERS = {"src", "tests", "workflow", "configs", "benchmarks", "profiles", "docs", ".ci"}

FENCE = re.compile(r"^```.*?^```[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
MODULE = re.compile(r"-m\s+(tying(?:\.\w+)+)")
PLACEHOLDER = re.compile(r"[{}<>$]|\.\.\.|…")


def split_code(text):
    """(prose without code, [code chunks]): fenced blocks and inline spans taken out of the prose."""
    fences = FENCE.findall(text)
    prose = FENCE.sub("", text)
    spans = CODE_SPAN.findall(prose)
    return CODE_SPAN.sub("", prose), fences + spans


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(text):
    """Every heading's anchor in a page (repeats get -1, -2, ... as on GitHub)."""
    seen, out = {}, set()
    for _, title in HEADING.findall(FENCE.sub("", text)):
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def ignored_patterns(root=ROOT):
    lines = (root / ".gitignore").read_text().splitlines()
    return [line.strip().strip("/") for line in lines if line.strip() and not line.startswith("#")]


def is_build_output(path, patterns):
    parts = Path(path).parts
    for pattern in patterns:
        if "/" in pattern:
            if path == pattern or path.startswith(pattern + "/"):
                return True
        elif any(fnmatch.fnmatch(part, pattern) for part in parts):
            return True
    return False


def repo_paths(chunk, folders, patterns):
    """The repository paths a code chunk names: words whose first part is a top-level folder."""
    for word in re.split(r"[\s\"'(),;=|]+", chunk):
        word = word.rstrip(".:").removeprefix("./")
        if "/" not in word or PLACEHOLDER.search(word) or "://" in word or "@" in word:
            continue
        if word.startswith(("/", "~", "-")) or word.split("/")[0] not in folders:
            continue
        if not is_build_output(word.rstrip("/"), patterns):
            yield word


def problems(page, text, root=ROOT):
    """One line per link, anchor, path or module in `text` (the page at `page`) that does not exist."""
    out = []
    prose, code = split_code(text)
    for target in LINK.findall(prose):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            out.append(f"{page.name}: link to {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            out.append(f"{page.name}: link to {target}: no heading #{anchor} in {dest.name}")
    folders = REPO_FOLDERS | {p.name for p in root.iterdir() if p.is_dir()}
    patterns = ignored_patterns(root)
    for chunk in code:
        for word in repo_paths(chunk, folders, patterns):
            found = list(root.glob(word.rstrip("/"))) if "*" in word else (root / word).exists()
            if not found:
                out.append(f"{page.name}: `{word}`: no such path in the repository")
        for module in MODULE.findall(chunk):
            base = root / "src" / Path(*module.split("."))
            if not (base.with_suffix(".py").exists() or (base / "__init__.py").exists()):
                out.append(f"{page.name}: `-m {module}`: no such module under src/")
    return out


def test_links_and_paths_exist():
    found = [line for page in PAGES for line in problems(page, page.read_text())]
    assert not found, "\n".join(found)


def test_every_docs_page_is_linked_from_the_readme_or_the_index():
    linked = set()
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md"):
        for target in LINK.findall(split_code(page.read_text())[0]):
            path = target.partition("#")[0]
            if path:
                linked.add((page.parent / path).resolve())
    pages = {p.resolve() for p in (ROOT / "docs").glob("*.md")}
    assert pages <= linked, sorted(p.name for p in pages - linked)


def test_readme_holds_the_install_and_test_commands_that_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line for line in ci if line.startswith(("python3 -m venv", ".venv/bin/python -m pytest"))]
    assert len(commands) == 2
    readme = (ROOT / "README.md").read_text().splitlines()
    assert all(command in readme for command in commands), commands


CONFIGFILE = re.compile(r"snakemake\b[^\n`]*?--configfile((?:[ \t]+[^\s`#(-][^\s`]*)+)")


def targets_after_configfile(text):
    """Words after a snakemake command's --configfile that are not YAML files: snakemake reads them as
    config files too (its --configfile takes several), so a target written there fails."""
    return [
        word
        for files in CONFIGFILE.findall(text)
        for word in files.split()
        if not word.rstrip(".,;:)").endswith((".yaml", ".yml"))
    ]


def test_documented_snakemake_commands_put_targets_before_configfile():
    sources = PAGES + sorted((ROOT / "configs").glob("*.yaml"))
    found = [f"{p.name}: {w}" for p in sources for w in targets_after_configfile(p.read_text())]
    assert not found, found
    assert targets_after_configfile("snakemake --cores 2 --configfile configs/a.yaml all") == ["all"]
    assert targets_after_configfile("snakemake all --configfile configs/a.yaml b.yml  # the grid") == []


def test_the_checker_flags_what_does_not_exist():
    page = ROOT / "docs" / "index.md"
    text = (
        "[a](missing.md) [b](../README.md#no-such-heading) [c](../README.md#install)\n"
        "`src/tying/no_such_module.py` `configs/paper.yaml` `results/built.parquet` `{arch}/x`\n"
        "```bash\n.venv/bin/python -m tying.no_such --config configs/nope.yaml\n```\n"
    )
    found = problems(page, text)
    assert len(found) == 5, found
    for name in ("missing.md", "#no-such-heading", "no_such_module.py", "tying.no_such", "nope.yaml"):
        assert any(name in line for line in found), (name, found)


# --- Every documented snakemake command plans --------------------------------------------------------------
COMMAND = re.compile(r"\.venv/bin/snakemake ([^\n`#\\]*)")
SKIP = ("--sdm", "--report", "--unlock", "--force", "TARGET")  # need a container, conda, a finished run


def documented_commands():
    """The argument lists of every `.venv/bin/snakemake` command in the pages and the configs' headers whose
    config files are in the repository, each once."""
    texts = [chunk for page in PAGES for chunk in split_code(page.read_text())[1]]
    texts += [p.read_text() for p in sorted((ROOT / "configs").glob("*.yaml"))]
    seen = {}
    for text in texts:
        for args in COMMAND.findall(text):
            words = args.split()
            files = (
                [w for w in words[words.index("--configfile") + 1 :] if w.endswith(".yaml")]
                if "--configfile" in words
                else []
            )
            if any(s in words for s in SKIP) or not all((ROOT / f).is_file() for f in files):
                continue
            seen.setdefault(" ".join(words), words)
    return list(seen.values())


def test_the_your_models_page_plans_as_written(tmp_path, monkeypatch):
    """docs/your-models.md's overlays (its YAML blocks, each the file its command's --configfile names, in order)
    beside tiny save_pretrained models at the paths they name, its commands dry-run as written from there."""
    from hubfixtures import _olmo, tiny_tokenizer

    page = (ROOT / "docs" / "your-models.md").read_text()
    overlays = [
        yaml.safe_load(block.split("\n", 1)[1].rsplit("```", 1)[0])
        for block in FENCE.findall(page)
        if block.startswith("```yaml")
    ]
    commands = [args.split() for chunk in split_code(page)[1] for args in COMMAND.findall(chunk)]
    assert len(overlays) == len(commands) == 2
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    for overlay, words in zip(overlays, commands):
        (tmp_path / words[words.index("--configfile") + 1]).write_text(yaml.safe_dump(overlay))
        for pair in overlay["pairs"].values():
            models = {pair["tied"]["path"]: True, pair["untied"]["path"]: False}
            models |= dict.fromkeys(pair.get("evolution", {}).values(), False)
            for path, tied in models.items():
                if not (tmp_path / path).exists():
                    _olmo(0, tied=tied).save_pretrained(tmp_path / path)
                    tiny_tokenizer().save_pretrained(tmp_path / path)
        result = cli(["-s", str(ROOT / "Snakefile"), "-n", *words])
        assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
        jobs = planned_jobs(result)
        assert jobs["local_tokens"] == jobs["lens"] == 2 and "hub_embeddings" not in jobs
        claims = "claims" in overlay["tables"]
        assert jobs.get("evolution", 0) == jobs.get("local_quality", 0) == (1 if claims else 0)
        assert result.stderr.count("pair 'mine': its models share 64 token strings") == 1  # as the page shows


def test_every_documented_command_plans(tmp_path, monkeypatch):
    """Each documented command dry-runs from a fresh folder (a -d or a config's workdir lands there), in this
    process (snakemake.cli.main, as the `snakemake` command runs it, without an interpreter start each)."""
    commands = documented_commands()
    assert any("configs/smoke.yaml" in c for c in commands) and any("configs/scaling.yaml" in c for c in commands)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    failed = []
    for n, words in enumerate(commands):
        args = [str(ROOT / w) if w.startswith(("configs/", "profiles/")) else w for w in words]
        cwd = tmp_path / str(n)
        cwd.mkdir()
        monkeypatch.chdir(cwd)
        result = cli(["-s", str(ROOT / "Snakefile"), "-n", *args])
        # a config error ends stderr, an exception snakemake logs ends stdout
        lines = [
            ln for ln in (result.stdout + result.stderr).splitlines() if ln.strip() and "specific profile" not in ln
        ]
        last = (lines or [""])[-1]
        empty_trajectory = "configs/trajectory.yaml" in words and "trajectory is empty" in last  # as its header says
        if result.returncode != 0 and not empty_trajectory:
            failed.append(f"snakemake {' '.join(words)}: {last}")
    assert not failed, "\n".join(failed)


def test_the_readme_stays_within_120_lines():
    """New results replace the README's sentences; the details live under docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 120


def test_the_indexs_layout_names_every_package_module():
    """docs/index.md's layout gives each package folder a bullet naming every module in it: a module it leaves out
    is one a newcomer cannot find by reading the page."""
    text = (ROOT / "docs" / "index.md").read_text()
    layout = text[text.index("## Layout") :]
    bullets = re.split(r"\n\s*- ", layout)
    listed = {}
    for bullet in bullets:
        folder = re.search(r"`(src/tying/(?:[a-z_]+/)*)`", bullet)
        names = set(re.findall(r"`([a-z0-9_]+\.py)`", bullet))
        if folder:
            listed.setdefault(folder.group(1), set()).update(names)
        listed.setdefault("src/tying/", set()).update(re.findall(r"`src/tying/([a-z0-9_]+\.py)`", bullet))
    missing = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "src" / "tying").rglob("*.py"))
        if p.name != "__init__.py" and p.name not in listed.get(str(p.parent.relative_to(ROOT)) + "/", set())
    ]
    assert not missing, f"docs/index.md's layout does not name {missing}"
