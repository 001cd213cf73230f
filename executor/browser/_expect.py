"""Bounded waits and expectations on a page: what an agent waits for, and what it expects.

URL patterns run in RE2 (``handrail._patterns``): a hostile one cannot hold the event loop.
"""

from __future__ import annotations

from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from handrail._patterns import url_predicate
from handrail.executor._models import Expectation, WaitFor
from handrail.executor._snapshot import RefInfo

__all__ = ["EXPECT_DEFAULT_MS", "expectation_holds", "wait_for"]

EXPECT_DEFAULT_MS = 2_000


async def wait_for(page: Page, wait: WaitFor, timeout_ms: int) -> None:
    """Wait (at most ``timeout_ms``) for every given part of ``wait``; Playwright's timeout
    error when one does not come."""
    state: Any = "hidden" if wait.gone else "visible"
    if wait.url_matches:
        await page.wait_for_url(url_predicate(wait.url_matches), timeout=timeout_ms)
    if wait.text:
        await page.get_by_text(wait.text).first.wait_for(state=state, timeout=timeout_ms)
    if wait.role:
        loc = page.get_by_role(wait.role, name=wait.name or None, exact=True)  # type: ignore[arg-type]
        await loc.first.wait_for(state=state, timeout=timeout_ms)


async def expectation_holds(page: Page, expect: Expectation, cited_refs: dict[str, RefInfo]) -> tuple[bool, str]:
    """Whether ``expect`` holds on ``page``, waiting at most its ``within_ms``; and why not."""
    budget = expect.within_ms or EXPECT_DEFAULT_MS
    state: Any = "hidden" if expect.gone else "visible"
    failures: list[str] = []

    async def wait(what: str, coro: Any) -> None:
        try:
            await coro
        except PlaywrightError:
            failures.append(what)

    if expect.url_matches:
        await wait(
            f"URL {page.url} does not match {expect.url_matches!r}",
            page.wait_for_url(url_predicate(expect.url_matches), timeout=budget),
        )
    if expect.text_visible:
        await wait(
            f"text {expect.text_visible!r} is {'still' if expect.gone else 'not'} visible",
            page.get_by_text(expect.text_visible).first.wait_for(state=state, timeout=budget),
        )
    if expect.role:
        loc = page.get_by_role(expect.role, name=expect.name or None, exact=True)  # type: ignore[arg-type]
        await wait(
            f"{expect.role} {expect.name!r} is {'still' if expect.gone else 'not'} visible",
            loc.first.wait_for(state=state, timeout=budget),
        )
    if expect.field_ref:
        info = cited_refs.get(expect.field_ref)
        if info is None:
            failures.append(f"field {expect.field_ref} is not a ref of the cited observation")
        else:
            field = page.get_by_role(info.role, name=info.name, exact=True)  # type: ignore[arg-type]
            try:
                value = await field.first.input_value(timeout=budget)
            except PlaywrightError as exc:
                value = f"<unreadable: {exc.message.splitlines()[0] if exc.message else type(exc).__name__}>"
            if value != expect.field_value:
                failures.append(f"field {info.name!r} holds {value!r}, not {expect.field_value!r}")
    return (not failures), "; ".join(failures)
