"""docs/settings.md is generated from app/settings.py (``python -m app.settings_doc``): these tests fail when the page
no longer says what the settings are, or when a setting has nothing to say about itself."""

from __future__ import annotations

from app import settings_doc
from app.settings import Settings


def test_the_settings_page_is_what_app_settings_says():
    page = settings_doc.PAGE.read_text()
    assert page == settings_doc.render(), "docs/settings.md is stale: run python -m app.settings_doc"
    assert settings_doc.main(["--check"]) == 0


def test_every_setting_is_on_the_page_with_its_variable_default_and_a_description():
    listed = {setting.name: setting for setting in settings_doc.settings()}
    assert list(listed) == list(Settings.model_fields)
    page = settings_doc.render()
    for name, setting in listed.items():
        assert setting.description, f"{name} has no description: give it a docstring in app/settings.py"
        row = next(line for line in page.splitlines() if line.startswith(f"| `{setting.variables[0]}`"))
        assert f"| {setting.default} |" in row, (name, row)
    assert settings_doc.settings()[0].variables == ("MEMSYS_DATABASE_URL",)
    assert listed["llm_api_key"].variables == ("MEMSYS_LLM_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY")
    assert listed["workers"].default == f"`{Settings.model_fields['workers'].default}`"
    assert listed["supersession"].description.endswith("One of `auto`, `suggest`, `off`.")


def test_every_setting_sits_under_its_section_comment():
    _, sections = settings_doc.docstrings()
    assert set(sections) == set(Settings.model_fields)
    assert sections["database_url"] == "database" and sections["proxy_enabled"].startswith("the OpenAI-compatible")
    assert sections["log_level"] == sections["access_log"] == "logging"
