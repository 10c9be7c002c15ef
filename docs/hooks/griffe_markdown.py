"""A griffe extension (mkdocstrings' loader) that turns pgjax's docstrings into Markdown as
``reference.docstring_markdown`` does: they are plain text with reStructuredText's inline
literals and ``::`` blocks, in which ``<name>`` or ``*`` would otherwise be read as HTML or
emphasis."""
import sys
from pathlib import Path

import griffe

sys.path.insert(0, str(Path(__file__).parent))
from reference import docstring_markdown  # noqa: E402


class PlainDocstrings(griffe.Extension):
    def on_object(self, *, obj, **kwargs) -> None:
        docstring = None if obj.is_alias else obj.docstring
        if docstring is not None and not getattr(docstring, "markdown", False):
            docstring.value = docstring_markdown(docstring.value)
            docstring.markdown = True
