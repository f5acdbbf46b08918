"""`ocibench COMMAND --help` works for every command: argparse formats each option's help
with %-interpolation, so a bare "10%" in a help text made `ocibench sweep --help` and
`ocibench healthcheck --help` end in a traceback (ValueError: unsupported format
character).  The commands are derived from the parser, never listed here."""

from __future__ import annotations

import argparse

import pytest

from ocibench import cli


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


COMMANDS = _commands()


def test_the_commands_are_found() -> None:
    assert {"sweep", "healthcheck", "evaluate", "ticket"} <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_commands_help_is_printed(name: str, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([name, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: ocibench {name}"), out[:200]
