"""Build hook: pages load the site's own worker shim (docs/assets/javascripts/frame-worker.js)
where Material's offline plugin would fetch one from a CDN, so the built site searches from
file:// with no network."""
from __future__ import annotations

CDN_SHIM = '<script src="https://unpkg.com/iframe-worker/shim"></script>'


def on_post_page(output: str, page, config) -> str:
    depth = page.url.count("/")
    local = f'<script src="{"../" * depth}assets/javascripts/frame-worker.js"></script>'
    return output.replace(CDN_SHIM, local)


def on_post_template(output: str, template_name: str, config) -> str:
    """The same for the site's static pages (404.html), which lie at its root."""
    return output.replace(CDN_SHIM, '<script src="assets/javascripts/frame-worker.js"></script>')
