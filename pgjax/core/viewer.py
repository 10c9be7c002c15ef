"""Brax's interactive viewer as one self-contained HTML file, for machines without internet.

Brax's page (``brax.io.html``) loads three.js, lil-gui and pako from public CDNs and its own
viewer modules from GitHub. ``brax_page`` renders Brax's page and replaces every one of those
URLs with the file itself, inlined (ES modules as ``data:`` URLs in the page's import map), so
the page opens from disk with no network. The three npm packages are fetched once from the npm
registry into a per-user folder (``$PGJAX_VIEWER_ASSETS``, default
``~/.cache/pgjax/viewer-assets``), checked against the SHA-256 pinned below; on a machine with
no route to the registry, run ``python -m pgjax.core.viewer fetch`` where there is one and copy the
folder. Brax's own viewer modules come from its installed package.

    python -m pgjax.core.viewer fetch [DIR]      # download and verify the assets
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import urllib.request
from pathlib import Path

from pgjax.core.errors import ConfigError

REGISTRY = "https://registry.npmjs.org"
# npm package -> (version, SHA-256 of its tarball, {path in the tarball: file name}); the
# versions are those Brax 0.14's viewer page names.
ASSETS = {
    "three": ("0.150.1", "d80de4da248b91ec3d7de3e3ba1c58f83414ecbad697035335abe0f2066d8fa9",
              {"package/build/three.module.js": "three.module.js",
               "package/examples/jsm/controls/OrbitControls.js": "OrbitControls.js"}),
    "lil-gui": ("0.18.0", "a7a083de09d33f931fb413915d080dd47ddab3ce07a17070aa2eece5f2a1728a",
                {"package/dist/lil-gui.esm.min.js": "lil-gui.esm.min.js"}),
    "pako": ("2.1.0", "49fedc8866b4abfc8e71dc7fe75ad4ef1ff1ac9601b0642cff88ee5bf2338709",
             {"package/dist/pako.min.js": "pako.min.js"}),
}


def assets_dir() -> Path:
    value = os.environ.get("PGJAX_VIEWER_ASSETS")
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pgjax" / "viewer-assets"


def fetch_assets(directory: Path | None = None) -> Path:
    """The folder with every asset file, downloading (and verifying) what is missing."""
    directory = Path(directory) if directory else assets_dir()
    for name, (version, sha256, files) in ASSETS.items():
        if all((directory / f).exists() for f in files.values()):
            continue
        url = f"{REGISTRY}/{name}/-/{name}-{version}.tgz"
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                data = r.read()
        except OSError as e:
            raise ConfigError(f"cannot download {url} ({e}); run `python -m pgjax.core.viewer "
                              f"fetch DIR` on a machine that reaches the npm registry and "
                              f"set PGJAX_VIEWER_ASSETS=DIR here") from None
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ConfigError(f"{url} does not match its pinned SHA-256; the download was "
                              f"altered or corrupted: retry, or fetch it elsewhere")
        directory.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member, target in files.items():
                (directory / target).write_bytes(tar.extractfile(member).read())
    return directory


def _module(source: str) -> str:
    return "data:text/javascript;base64," + base64.b64encode(source.encode()).decode("ascii")


def brax_page(sys_, states, height: int | None = None) -> str:
    """Brax's viewer page for ``states`` of ``sys_``, with every script inlined."""
    import brax
    from brax.io import html

    assets = fetch_assets()
    js = Path(brax.__file__).parent / "visualizer" / "js"
    local = {p.stem: p.read_text() for p in js.glob("*.js")}
    # the viewer's relative imports become bare names that the import map resolves
    for stem in local:
        for other in local:
            local[stem] = local[stem].replace(f"'./{other}.js'", f"'brax-{other}'")
    imports = {"three": _module((assets / "three.module.js").read_text()),
               "three/addons/controls/OrbitControls.js":
                   _module((assets / "OrbitControls.js").read_text()),
               "lilgui": _module((assets / "lil-gui.esm.min.js").read_text()),
               "viewer": _module(local["viewer"])}
    imports.update({f"brax-{stem}": _module(src) for stem, src in local.items()
                    if stem != "viewer"})
    page = html.render(sys_, list(states), height=height or "100vh", colab=False,
                       base_url="pgjax-inlined")
    page = re.sub(r'<script type="importmap">.*?</script>',
                  lambda _: '<script type="importmap">\n' + json.dumps({"imports": imports})
                  + "\n</script>", page, count=1, flags=re.S)
    page = re.sub(r'<script async src="[^"]*es-module-shims[^"]*"></script>', "", page)
    pako = (assets / "pako.min.js").read_text().replace("</script", "<\\/script")
    page = re.sub(r'<script src="[^"]*pako[^"]*"></script>',
                  lambda _: f"<script>{pako}</script>", page)
    page = re.sub(r'<link rel="shortcut icon"[^>]*>', "", page)
    left = re.findall(r'(?:src|href)="(https?://[^"]+)"', page)
    if left:
        raise ConfigError(f"Brax's viewer page loads {left[0]}, which pgjax does not inline "
                          f"(a Brax version pgjax was not tested with); use --out with .mp4")
    return page


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "fetch":
        print("usage: python -m pgjax.core.viewer fetch [DIR]", file=sys.stderr)
        return 2
    try:
        print(fetch_assets(Path(argv[1]) if len(argv) > 1 else None))
    except ConfigError as e:
        print(f"pgjax viewer: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
