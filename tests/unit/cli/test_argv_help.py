"""``trainkit fit -c config.yaml --help`` in a user's project: the configured model's class
and docstring."""

from __future__ import annotations

import pytest

from tests.helpers.user_project import make_project


@pytest.fixture
def project(tmp_path):
    """A user's project folder: a package ``myproj`` and ``config.yaml``, nothing installed."""
    return make_project(tmp_path)


def test_help_with_a_config_shows_the_configured_model_and_its_docstring(project, run_main):
    result = run_main("fit", "-c", "config.yaml", "--help")  # in project, the test's folder
    assert result.returncode == 0, result.stderr
    assert "model: myproj.Line (from your config)" in result.stdout
    assert "A straight line through four inputs" in result.stdout
    assert "How many inputs the line takes." in result.stdout
