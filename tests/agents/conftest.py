"""The ``agents`` marker: coding-agent CLI tests, run by ``make test-agents`` only."""


def pytest_configure(config):  # type: ignore[no-untyped-def]
    config.addinivalue_line(
        "markers",
        "agents: runs a real coding-agent CLI (Claude Code, Codex, Gemini CLI) through the gateway; needs node and `make agents-setup`",
    )
