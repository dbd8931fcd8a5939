"""The ``mklkit-cli`` directive: the command line's help, from its argparse parser, one section per command.

The text is what ``mklkit --help`` and ``mklkit COMMAND --help`` print, so the reference cannot drift from
the parser.
"""

from __future__ import annotations

import argparse
import os
from typing import Any
from unittest import mock

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


class MklkitCli(SphinxDirective):
    """Sections ``mklkit`` and ``mklkit COMMAND`` holding each parser's help as a literal block."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from mklkit.cli.parser import parser

        main = parser()
        # argparse wraps the help to the terminal's width: the same on every machine, for this directive only
        with mock.patch.dict(os.environ, {"COLUMNS": "100"}):
            out: list[nodes.Node] = [self._section("mklkit", main)]
            for name, sub in _commands(main).items():
                out.append(self._section(f"mklkit {name}", sub))
        return out

    def _section(self, title: str, p: argparse.ArgumentParser) -> nodes.section:
        ident = nodes.make_id(title)
        sec = nodes.section(ids=[ident], names=[nodes.fully_normalize_name(title)])
        sec += nodes.title(text=title)
        text = p.format_help()
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        sec += block
        self.state.document.note_implicit_target(sec)
        return sec


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("mklkit-cli", MklkitCli)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
