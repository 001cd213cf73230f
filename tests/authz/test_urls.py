"""The sidecar's origin of a URL is the one Chromium loads, on a table of hostile URLs.

Each URL is parsed by the sidecar (``url_origin``: WHATWG, ada-url) and loaded by the real
Chromium, every request of which is answered by a route (no DNS, no network), so that
what Chromium asked for and where it landed can be read. Either both agree on the origin,
or neither gives an origin a grant could name (``null``, ``file://``, a refused load).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from playwright.async_api import Route, async_playwright

from handrail.authz import InvalidArgumentError
from handrail.authz._core import normalize_origin, url_origin
from handrail.authz._urls import OPAQUE_ORIGIN
from handrail.executor.browser import CHROMIUM_ARGS, chromium_path

REFUSED = "REFUSED"

# (URL, the origin a browser loads — or REFUSED when it loads nothing a grant could name)
HOSTILE: list[tuple[str, str]] = [
    # userinfo and backslashes: the classic confusions of RFC 3986 parsers
    ("http://HOST_B\\@HOST_A/", "http://host_b"),
    ("http://host-b.test\\@host-a.test/x", "http://host-b.test"),
    ("http://user:pass@host-a.test/", "http://host-a.test"),
    ("http://host-a.test@host-b.test/", "http://host-b.test"),
    ("http://host-a.test%2f@host-b.test/", "http://host-b.test"),
    ("http://host-a.test\\.host-b.test/", "http://host-a.test"),
    ("https://host-a.test:443@host-b.test/", "https://host-b.test"),
    ("http://host-a.test#@host-b.test/", "http://host-a.test"),
    ("http://host-a.test?@host-b.test/", "http://host-a.test"),
    ("http:host-b.test/", "http://host-b.test"),
    ("http:/host-b.test/", "http://host-b.test"),
    ("http:\\\\host-b.test\\x", "http://host-b.test"),
    # case, ports
    ("HTTP://HOST-A.TEST:80/", "http://host-a.test"),
    ("http://host-a.test:0080/", "http://host-a.test"),
    ("https://host-a.test:443/", "https://host-a.test"),
    ("http://host-a.test:8080/", "http://host-a.test:8080"),
    ("http://host-a.test:/", "http://host-a.test"),
    ("https://host-a.test:80/", "https://host-a.test:80"),
    ("http://host-a.test:65536/", REFUSED),
    ("http://host-a.test:8o/", REFUSED),
    # IPv4 in every form a browser accepts
    ("http://0x7f.1/", "http://127.0.0.1"),
    ("http://2130706433/", "http://127.0.0.1"),
    ("http://0177.0.0.1/", "http://127.0.0.1"),
    ("http://127.1/", "http://127.0.0.1"),
    ("http://0x7f000001/", "http://127.0.0.1"),
    ("http://127.0.0.1./", "http://127.0.0.1"),
    ("http://256.0.0.1/", REFUSED),
    ("http://1.2.3.4.5/", REFUSED),
    ("http://0x100000000/", REFUSED),
    # IPv6
    ("http://[::1]/", "http://[::1]"),
    ("http://[0:0:0:0:0:0:0:1]:8000/", "http://[::1]:8000"),
    ("http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]"),
    ("http://[::1/", REFUSED),
    # IDN, punycode, full-width and percent-encoded hosts
    ("http://bücher.test/", "http://xn--bcher-kva.test"),
    ("http://xn--bcher-kva.test/", "http://xn--bcher-kva.test"),
    ("http://\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.test/", "http://example.test"),  # full-width
    ("http://exa%6dple.test/", "http://example.test"),
    ("http://%68ost-a.test/", "http://host-a.test"),
    ("http://host-a.test%2Ehost-b.test/", "http://host-a.test.host-b.test"),
    ("http://host-a.test%00.evil/", REFUSED),
    ("http://host-a.test./", "http://host-a.test."),
    # whitespace and control characters
    ("  http://host-a.test/  ", "http://host-a.test"),
    ("http://host-a.test/\t\n", "http://host-a.test"),
    ("http://host\ta.test/", "http://hosta.test"),
    ("http://host\na-b.test/", "http://hosta-b.test"),
    ("\x01http://host-a.test/", "http://host-a.test"),
    # schemes with no origin a grant could name
    ("javascript:alert(1)", REFUSED),
    ("JaVaScRiPt:alert(1)", REFUSED),
    ("data:text/html,<h1>hi</h1>", REFUSED),
    ("about:blank", REFUSED),
    ("file:///etc/hostname", REFUSED),
    ("ws://host-a.test/", REFUSED),
    ("//host-b.test/", REFUSED),
]


def _grantable(origin: str) -> bool:
    """Whether an operator could name ``origin`` in a grant."""
    try:
        return normalize_origin("origin", origin) == origin
    except InvalidArgumentError:
        return False


def _sidecar(url: str) -> str:
    try:
        origin = url_origin("resource.url", url)
    except InvalidArgumentError:
        return REFUSED
    return origin if _grantable(origin) else REFUSED


async def _chromium_origins(urls: list[str]) -> dict[str, str]:
    """Load each URL in a fresh page, six at a time; answer the origin it landed on, or REFUSED."""
    found: dict[str, str] = {}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context()

            async def answer(route: Route) -> None:
                await route.fulfill(status=200, content_type="text/html", body="<title>loaded</title>")

            await context.route("**/*", answer)
            turns = asyncio.Semaphore(6)  # a page's start is mostly waiting: six overlap

            async def load(url: str) -> None:
                async with turns:
                    page = await context.new_page()
                    try:
                        await page.goto(url, timeout=5_000)
                        origin = await page.evaluate("location.origin")
                    except Exception:  # any refusal to load counts as refused
                        origin = REFUSED
                    ok = origin not in (OPAQUE_ORIGIN, "file://", "") and _grantable(origin)
                    found[url] = origin if ok else REFUSED
                    await page.close()

            await asyncio.gather(*(load(url) for url in urls))
        finally:
            await browser.close()
    return found


@pytest.fixture(scope="module")
def chromium() -> Iterator[dict[str, str]]:
    yield asyncio.run(_chromium_origins([url for url, _ in HOSTILE]))


def test_the_table_is_long_enough() -> None:
    assert len(HOSTILE) >= 40
    assert len({url for url, _ in HOSTILE}) == len(HOSTILE)


@pytest.mark.browser
@pytest.mark.slow  # a Chromium of its own, 53 loads
@pytest.mark.parametrize(("url", "expected"), HOSTILE, ids=[repr(u)[1:-1][:40] for u, _ in HOSTILE])
def test_the_sidecar_judges_the_origin_chromium_loads(chromium: dict[str, str], url: str, expected: str) -> None:
    assert (_sidecar(url), chromium[url]) == (expected, expected)


def test_a_grant_origin_is_parsed_the_same_way() -> None:
    assert normalize_origin("o", "HTTP://Bücher.TEST:80") == "http://xn--bcher-kva.test"
    assert normalize_origin("o", "http://0x7f.1:8000/") == "http://127.0.0.1:8000"
    for bad in (
        "http://a.test/path",
        "http://user@a.test",
        "data:text/html,x",
        "http://a.test\\b",
        "file:///x",
        "ws://a",
    ):
        with pytest.raises(InvalidArgumentError):
            normalize_origin("grant.origins[0]", bad)
