"""The Spacefile is a manifest that Deta Space's schema (v0) would accept.

Deta Space shut down on 2024-10-17; the file is kept only as a valid manifest, so
these tests check its shape against the rules of the published v0 schema.
"""
import re
from pathlib import Path

import yaml

SPACEFILE = Path(__file__).resolve().parents[2] / "Spacefile"

# Engines the v0 schema allowed.
DETA_ENGINES = {"static", "react", "svelte", "vue", "next", "nuxt", "svelte-kit",
                "python3.9", "python3.8", "nodejs16", "custom"}
TOP_KEYS = {"v", "icon", "app_name", "micros"}
MICRO_KEYS = {"name", "src", "engine", "primary", "path", "commands", "run", "dev",
              "presets", "public_routes", "actions", "include", "serve"}


def load():
    return yaml.safe_load(SPACEFILE.read_text())


def test_top_level_is_version_0_with_known_keys():
    """The manifest says v: 0 and uses only the keys the v0 schema defines."""
    doc = load()
    assert doc["v"] == 0
    assert set(doc) <= TOP_KEYS, set(doc) - TOP_KEYS
    assert len(doc.get("app_name", "")) <= 12  # the schema's maxLength


def test_one_python_micro_that_runs_the_app():
    """There is exactly one micro, named specviz, whose engine Deta knew and which runs app.py."""
    micros = load()["micros"]
    assert len(micros) == 1
    micro = micros[0]
    assert set(micro) <= MICRO_KEYS, set(micro) - MICRO_KEYS
    assert micro["name"] == "specviz"
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", micro["name"])
    assert micro["src"] == "."
    assert micro["engine"] in DETA_ENGINES
    assert micro["engine"].startswith("python")
    assert micro["run"] == "python app.py"
    assert (SPACEFILE.parent / "app.py").is_file()


def test_env_presets_have_the_schema_shape():
    """Each env preset has a name and only string-valued name/description/default fields."""
    env = load()["micros"][0].get("presets", {}).get("env", [])
    for entry in env:
        assert set(entry) <= {"name", "description", "default"}
        assert "name" in entry
        assert all(isinstance(v, str) for v in entry.values())
