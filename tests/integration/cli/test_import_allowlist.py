"""TRAINKIT_IMPORT_ALLOWLIST, each case in a new interpreter: jsonargparse keeps an import
policy for the whole process, and its public settings can add to it but never take an
entry back."""

from __future__ import annotations

from tests.helpers.command_env import cli_env


def test_with_an_allowlist_only_its_packages_and_trainkits_own_are_importable(
    run_cli, autoencoder_config, tmp_path
):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "__init__.py").write_text(
        "from trainkit.demos.autoencoder import AutoEncoder as Mine\n"
    )
    quick = ["--trainer.max_epochs", "1", "--data.num_samples", "64"]
    allowed = cli_env(TRAINKIT_IMPORT_ALLOWLIST="mine")
    ok = run_cli("fit", "-c", autoencoder_config, "--model", "mine.Mine", *quick, env=allowed)
    assert ok.returncode == 0, ok.stderr
    refused = run_cli(
        "fit", "-c", autoencoder_config, "--model", "tests.helpers.models.Failing", env=allowed
    )
    assert refused.returncode == 2
    assert "is outside TRAINKIT_IMPORT_ALLOWLIST" in refused.stderr
    assert "add 'tests' to TRAINKIT_IMPORT_ALLOWLIST if you trust it" in refused.stderr


def test_a_class_path_the_policy_refuses_by_name_is_never_imported(
    run_cli, autoencoder_config, tmp_path
):
    """The refusal comes before any import: a module outside the allowlist never runs (it used
    to be imported to look for an error of its own, printing the Zen of Python for this.Zen)."""
    (tmp_path / "noisy.py").write_text(
        "import pathlib\npathlib.Path('imported').touch()\nprint('noisy ran')\nclass Model: ...\n"
    )
    allowed = cli_env(TRAINKIT_IMPORT_ALLOWLIST="mine")
    for path in ("noisy.Model", "this.Zen"):
        result = run_cli("fit", "-c", autoencoder_config, "--model", path, env=allowed)
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert f"class_path {path!r} is outside TRAINKIT_IMPORT_ALLOWLIST" in line, line
        assert result.stdout == "", result.stdout  # neither 'noisy ran' nor the Zen of Python
    assert not (tmp_path / "imported").exists()
