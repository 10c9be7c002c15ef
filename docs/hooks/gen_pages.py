"""Run by the mkdocs-gen-files plugin when the site is built: writes the generated reference
pages (``reference.py``), the notebooks in ``notebooks/`` as the tutorials, the figures the
pages show from the committed records (a page links ``images/results/<path>`` for
``experiments/results/<path>``), and, with ``PGJAX_DOCS_STUBS=1`` only, a stub for each page
of the navigation not written yet."""
import os
import re
import sys
from pathlib import Path

import mkdocs_gen_files
import yaml

sys.path.insert(0, str(Path(__file__).parent))
import reference  # noqa: E402

for path, text in reference.pages().items():
    with mkdocs_gen_files.open(path, "w") as f:
        f.write(text)

for notebook in sorted((reference.REPO / "notebooks").glob("*.ipynb")):
    with mkdocs_gen_files.open(f"tutorials/{notebook.name}", "wb") as f:
        f.write(notebook.read_bytes())

RESULTS = reference.REPO / "experiments" / "results"
figures = set()
for page in (reference.REPO / "docs").rglob("*.md"):
    figures.update(re.findall(r"images/results/([^)\s\"'#?]+)", page.read_text(encoding="utf-8")))
for figure in sorted(figures):
    if (RESULTS / figure).is_file():  # a missing one is a broken link: the build says so
        with mkdocs_gen_files.open(f"images/results/{figure}", "wb") as f:
            f.write((RESULTS / figure).read_bytes())


def nav_pages(items):
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            yield from nav_pages(value)
        elif not value.startswith(("http:", "https:")):
            yield value


if os.environ.get("PGJAX_DOCS_STUBS") == "1":  # while pages are being written
    config = yaml.load((reference.REPO / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    docs = reference.REPO / "docs"
    for page in nav_pages(config["nav"]):
        if not (docs / page).exists() and page not in mkdocs_gen_files.editor.FilesEditor \
                .current().files.src_uris:
            with mkdocs_gen_files.open(page, "w") as f:
                f.write(f"# {Path(page).stem.replace('-', ' ').capitalize()}\n\n"
                        f"Not written yet.\n")
