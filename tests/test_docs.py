"""The documentation site: the configuration reference is what docs/generate.py writes from the
settings model (a key added, renamed or re-described in gateway/settings.py without regenerating
fails here), and every page the nav of mkdocs.yml names exists."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from gateway.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("generate", ROOT / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_configuration_reference_is_generated_from_the_settings_model() -> None:
    gen = _generator()
    committed = gen.PAGE.read_text()
    assert committed == gen.render(), (
        "docs/configuration-reference.md is stale (a config key was added, removed or re-commented in "
        "gateway/settings.py): regenerate it with `.venv/bin/python docs/generate.py` and commit it"
    )


def test_every_config_key_is_on_the_reference_page() -> None:
    page = (ROOT / "docs" / "configuration-reference.md").read_text()
    gen = _generator()
    for path in gen.known_paths(Settings, ""):
        section, _, key = path.rpartition(".")
        assert f"| `{key}` |" in page, f"config key {path} is not documented"
        assert section.split(".")[0] in page


def test_every_page_in_the_nav_exists() -> None:
    nav = re.findall(r":\s*([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert "index.md" in nav and "configuration-reference.md" in nav
    for page in nav:
        assert (ROOT / "docs" / page).is_file(), f"mkdocs.yml names docs/{page}, which does not exist"


def test_readme_is_the_front_door() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; the manual lives in docs/"


def test_architecture_page_carries_the_codec_docstring() -> None:
    gen = _generator()
    page = gen.ARCHITECTURE.read_text()
    assert page == gen.render_architecture(page), (
        "docs/architecture.md's copy of the gateway/dialects/base.py docstring is stale: regenerate it with "
        "`.venv/bin/python docs/generate.py` and commit it"
    )
