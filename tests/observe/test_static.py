"""The page works offline: every asset it loads ships inside the package."""

from __future__ import annotations

import re

from lakefeed.observe.server import STATIC


def test_page_loads_only_packaged_assets():
    html = (STATIC / "index.html").read_text()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets, "the page loads no scripts or styles?"
    for asset in assets:
        assert "//" not in asset, f"{asset} is not a packaged file (closed networks have no CDN)"
        assert (STATIC.parent / asset).is_file(), f"{asset} is missing from the package"
    for script in ("app.js", "vendor/uPlot.iife.min.js"):
        assert "http://" not in (STATIC / script).read_text().replace("http://www.w3.org", "")
    assert (STATIC / "vendor" / "uPlot.LICENSE").read_text().startswith("The MIT License")
