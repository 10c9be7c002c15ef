"""The argument parser the ``pgjax`` commands share: help as plain terminal text (no
reStructuredText markup) and bad arguments as one line (exit 2) naming the option probably
meant."""
from __future__ import annotations

import argparse


def plain(text: str) -> str:
    """``text`` without reStructuredText markup, to read in a terminal: ````code```` and
    ``:role:`name``` as their text, a paragraph's closing ``::`` as ``:``."""
    import re

    text = re.sub(r":[a-z]+:`([^`]+)`", r"\1", text)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`]+)`", r"\1", text)
    return re.sub(r"::$", ":", text, flags=re.M)


def help_text(doc: str) -> str:
    """A command's description from its module docstring: the first paragraph and the
    examples after it (indented blocks, and a paragraph that introduces one with ``::``),
    as plain text."""
    paragraphs = doc.strip("\n").split("\n\n")
    keep = paragraphs[:1]
    for p in paragraphs[1:]:
        if not (p.startswith("    ") or p.rstrip().endswith("::")):
            break
        keep.append(p)
    return plain("\n\n".join(keep))


class ArgumentParser(argparse.ArgumentParser):
    """The parser of a ``pgjax`` command (eval, render, plot, sweep): its description is its
    module docstring as plain text, and bad arguments are one line (exit 2) that names the
    option probably meant: ``unrecognized arguments: '--epsiodes' (did you mean
    '--episodes'?) 3``."""

    def __init__(self, prog: str, doc: str, **kw):
        super().__init__(prog=prog, description=help_text(doc),
                         formatter_class=argparse.RawDescriptionHelpFormatter, **kw)

    def add_argument(self, *args, **kw):
        if isinstance(kw.get("help"), str):
            kw["help"] = plain(kw["help"])
        return super().add_argument(*args, **kw)

    def parse_args(self, args=None, namespace=None):
        from pgjax.core.errors import did_you_mean

        namespace, extra = self.parse_known_args(args, namespace)
        if extra:
            flags = [f for f in self._option_string_actions if f.startswith("--")]
            self.error("unrecognized arguments: " + " ".join(
                f"'{a.split('=')[0]}'{hint}" if (hint := did_you_mean(a.split("=")[0], flags))
                else a for a in (str(x) for x in extra)))
        return namespace

    def error(self, message: str):
        import re

        from pgjax.core.errors import did_you_mean

        choice = re.match(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$",
                          message)
        if choice:
            name, value = choice.group(1), choice.group(2)
            allowed = re.findall(r"'([^']*)'", choice.group(3))
            message = (f"invalid {name} '{value}'{did_you_mean(value, allowed)}; pass {name} "
                       f"with one of {', '.join(allowed)}")
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} --help\n")


__all__ = ["ArgumentParser", "help_text", "plain"]
