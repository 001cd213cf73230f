"""The switches Chromium is started with are the ones it applies.

Chromium keeps only the last ``--disable-features`` switch, whole. Playwright passes its own
list and ours comes after it, so ours must carry Playwright's (``PLAYWRIGHT_DISABLED_FEATURES``):
these tests read the command line of the browser the host really started, so a Playwright
upgrade that changes its list fails here, not as a redirect aborted under interception.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from handrail.executor.browser import BrowserHost

pytestmark = pytest.mark.browser


def _descendants(root: int) -> dict[int, list[str]]:
    """The command line of every process below ``root``, by pid."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    below = {root}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in below and pid not in below:
                below.add(pid)
                grew = True
    below.discard(root)
    lines = {}
    for pid in below:
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if raw:
            args = raw.decode(errors="replace").rstrip("\0").split("\0")
            # Chromium's child processes rewrite their argv as one line, switches spaced
            lines[pid] = args[0].split(" ") if len(args) == 1 else args
    return lines


@pytest.fixture(scope="module")
def chromium() -> tuple[list[str], list[list[str]]]:
    """What the host's browser runs as (one launch for the module): the browser process's
    switches, and every Chromium process's (renderers, utilities) command line."""

    async def look() -> list[list[str]]:
        before = _descendants(os.getpid())  # other tests' browsers, if any are open
        host = BrowserHost()
        await host.start()
        try:
            surface = await host.open_page("data:text/html,<p>hi</p>")
            await asyncio.sleep(1.0)  # what Chromium makes ahead, it makes within this
            lines = [c for pid, c in _descendants(os.getpid()).items() if pid not in before]
            await surface.close()
            return lines
        finally:
            await host.close()

    lines = [c for c in asyncio.run(look()) if Path(c[0]).name.startswith("chrom")]
    browsers = [c for c in lines if not any(a.startswith("--type=") for a in c)]
    assert len(browsers) == 1, [c[:3] for c in lines]
    return browsers[0], lines


def test_the_last_disable_features_switch_carries_every_earlier_one(
    chromium: tuple[list[str], list[list[str]]],
) -> None:
    browser, _ = chromium
    lists = [set(a.split("=", 1)[1].split(",")) for a in browser if a.startswith("--disable-features=")]
    assert len(lists) >= 2, "Playwright's switch and ours are both expected"
    missing = set().union(*lists[:-1]) - lists[-1]
    assert not missing, f"Chromium would drop these earlier --disable-features: {sorted(missing)}"
    assert {"BackForwardCache", "AvoidCorsURLLoaderRestartOnRedirect"} <= lists[-1]


def test_no_address_bar_popup_is_made_ahead(chromium: tuple[list[str], list[list[str]]]) -> None:
    _, processes = chromium
    webui = [c for c in processes if "--top-chrome-webui" in c]
    assert not webui, "a renderer for the browser's own WebUI was started (about a second of CPU per launch)"
