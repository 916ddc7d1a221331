"""``--help``: every option states its default and every command ends with examples
that the parser accepts."""

from __future__ import annotations

import argparse
import shlex

import pytest

from accelsim import cli, cli_parser


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = cli_parser.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_option_states_its_default(name: str) -> None:
    command = commands()[name]
    text = command.format_help()
    for action in command._actions:
        if not action.option_strings or action.required or action.default is argparse.SUPPRESS:
            continue
        shown = command.formatter_class(prog="x")._get_help_string(action)  # type: ignore[attr-defined]
        assert shown is not None and "default" in shown, (name, action.option_strings)
    assert "\nexamples:\n  accelsim " + name in text


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_example_parses(name: str) -> None:
    parser = cli_parser.build_parser()
    for example in cli_parser.EXAMPLES[name]:
        for part in example.replace("\\\n", " ").split("&&"):
            words = shlex.split(part)
            if words[0] == "accelsim":
                args = parser.parse_args(words[1:])
                assert args.command == words[1]


def test_defaults_are_shown_in_words() -> None:
    help_text = commands()["sweep"].format_help()
    assert "--out OUT            parent of the sweep's directory (default: results)" in help_text
    assert "(default: off)" in help_text  # --retry-failed
    run_help = " ".join(commands()["run"].format_help().split())
    assert "workload.input.height=32 (default: none)" in run_help
