"""Every `eb-pytorch-cuda` subcommand's --help says what the command does, shows how it is run, and says what
each of its arguments is: a user reads --help before any page of documentation.

Read from the parser itself (cli.build_parser), in this process: a new subcommand or argument without its text
fails here.  The documentation addresses the help names must be sections that exist in docs/.
"""

import argparse
import re
from pathlib import Path

import pytest

from eb_pytorch_cuda import PROJECT_URL, clihelp
from eb_pytorch_cuda.cli import PROG, build_parser

REPO = Path(__file__).resolve().parent.parent


def subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, action.choices


def test_every_subcommand_has_a_description_and_examples_text():
    parser, choices = subparsers()
    assert list(choices) == list(clihelp.commands())
    for name, sub in choices.items():
        assert sub.description and len(sub.description) > 60, name
        assert sub.formatter_class is argparse.RawDescriptionHelpFormatter, name
        examples = sub.epilog.split('examples:\n', 1)[1].split('\n\n', 1)[0].splitlines()
        assert examples and all(line.startswith('  ') for line in examples), (name, sub.epilog)
        assert [line for line in examples if re.match(rf'  ({PROG}|eval "\$\({PROG}) {name}( |\)|$)', line)], name
        assert f'documentation: {PROJECT_URL}/' in sub.epilog, name
        text = sub.format_help()  # renders: no stray % in a help text
        assert 'examples:' in text and sub.description.splitlines()[0] in text
    assert 'documentation: ' in parser.epilog and f'{PROG} COMMAND --help' in parser.epilog


@pytest.mark.parametrize('name', clihelp.commands())
def test_every_argument_of_every_subcommand_has_help(name):
    sub = subparsers()[1][name]
    for action in sub._actions:
        assert action.help and action.help != argparse.SUPPRESS and len(action.help) > 10, \
            (name, action.option_strings or action.dest)


def test_the_main_parser_lists_every_subcommand_with_a_line():
    parser, choices = subparsers()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(a.dest for a in action._choices_actions) == sorted(choices)
    assert all(a.help for a in action._choices_actions)
    assert all(a.help for a in parser._actions)


def github_anchors(page):
    """The anchors GitHub gives page's headings (lower case; punctuation but '-' and '_' dropped; spaces '-')."""
    text = (REPO / 'docs' / f'{page}.md').read_text()
    headings = re.findall(r'^#{1,6} (.+)$', re.sub(r'```.*?```', '', text, flags=re.S), re.M)
    return {re.sub(r'[^\w\- ]', '', heading.lower()).replace(' ', '-') for heading in headings}


def test_the_documentation_the_help_names_exists():
    _, choices = subparsers()
    for name, sub in choices.items():
        page, anchor = re.search(r'/docs/([\w-]+)\.md#([\w-]+)', sub.epilog).groups()
        assert anchor in github_anchors(page), (name, page, anchor)
