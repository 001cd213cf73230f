"""Where the worker guard goes in a worker's source (``executor/browser/_workerstart.py``).

The pages that make workers, hostile ones included, are in ``test_attacks_egress.py``;
these are the placements, on sources a page chooses.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handrail.executor.browser._workerstart import (
    CLASSIC_GUARD,
    MODULE_GUARD,
    WorkerScripts,
    guarded_source,
)

G = CLASSIC_GUARD


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("postMessage(1);", G + "postMessage(1);"),
        ("'use strict';\nx = 1;", "'use strict';\n" + G + "x = 1;"),
        ('"use strict"\nx = 1;', '"use strict"\n' + G + "x = 1;"),
        (
            "// a comment\n/* and\nanother */ 'use strict'; 'use asm';x",
            "// a comment\n/* and\nanother */ 'use strict'; 'use asm';" + G + "x",
        ),
        # A string that is an expression, not a directive, stays behind the guard.
        ("'abc'.length; x", G + "'abc'.length; x"),
        ("'a' + 'b';", G + "'a' + 'b';"),
        # An escaped quote does not end the directive early.
        ("'it\\'s';x", "'it\\'s';" + G + "x"),
        # An unclosed comment or string: nothing is skipped past it.
        ("/* never closed", G + "/* never closed"),
        ("'never closed\nx", G + "'never closed\nx"),
        ("", G),
        # A line comment ends at any of JavaScript's line terminators: the code after a
        # carriage return or a line or paragraph separator runs, so it stays behind the guard.
        ("// x\rnew WebTransport(u)\n", "// x\r" + G + "new WebTransport(u)\n"),
        ("// x\u2028new WebTransport(u)\n", "// x\u2028" + G + "new WebTransport(u)\n"),
        ("// x\u2029new WebTransport(u)\n", "// x\u2029" + G + "new WebTransport(u)\n"),
        # A hashbang comment is one only at the very start: the guard goes after it.
        ("#!/usr/bin/env node\n'use strict';x", "#!/usr/bin/env node\n'use strict';" + G + "x"),
        ("x;\n#!/not/first\n", G + "x;\n#!/not/first\n"),
        # JavaScript's white space beyond ASCII, and a directive ended by a carriage return.
        ("\u00a0\u3000'use strict'\rx", "\u00a0\u3000'use strict'\r" + G + "x"),
    ],
)
def test_the_guard_goes_after_the_prologue(source: str, expected: str) -> None:
    assert guarded_source(source, module=False) == expected


def test_a_module_guard_is_its_first_import() -> None:
    source = "import { a } from './a.js';\nexport const b = a;"
    assert guarded_source(source, module=True) == MODULE_GUARD + source
    assert MODULE_GUARD.startswith('import "data:text/javascript;base64,')


def test_the_guard_adds_no_line() -> None:
    assert "\n" not in CLASSIC_GUARD
    assert "\n" not in MODULE_GUARD


@given(st.text(alphabet="'\"/*\\ \t\nusetric;x+.", max_size=60))
def test_the_source_is_kept_whole(source: str) -> None:
    out = guarded_source(source, module=False)
    at = out.index(G)
    assert out[:at] + out[at + len(G) :] == source


@pytest.mark.timeout(20)
def test_a_long_hostile_prologue_is_scanned_in_linear_time() -> None:
    # Backtracking engines take exponential time on some of these; RE2 does not.
    for source in ("/*" * 200_000, "'\\" * 200_000, " " * 400_000 + "!", "''" * 200_000 + "x"):
        out = guarded_source(source, module=False)
        assert G in out


def test_a_context_keeps_its_worker_scripts_and_refuses_past_its_bound() -> None:
    scripts = WorkerScripts()
    assert scripts.note("http://a.test/w.js#frag", module=False)
    assert scripts.module_of("http://a.test/w.js") is False
    assert scripts.module_of("http://a.test/other.js") is None
    # Announced once as a module's, it keeps the module guard (a classic script then fails
    # to parse; a classic guard in front of a module would run after its imports).
    assert scripts.note("http://a.test/w.js", module=True)
    assert scripts.note("http://a.test/w.js", module=False)
    assert scripts.module_of("http://a.test/w.js") is True
    # None is forgotten however many a page announces: past the bound, new ones are refused.
    for i in range(5000):
        scripts.note(f"http://a.test/{i}.js", module=False)
    assert len(scripts) == 4096
    assert scripts.module_of("http://a.test/w.js") is True
    assert not scripts.note("http://a.test/new.js", module=False)
    assert scripts.note("http://a.test/w.js", module=True)  # a known one still is


def test_a_byte_order_mark_is_dropped_and_the_prologue_kept() -> None:
    # As the browser's UTF-8 decoding of a worker's script drops it.
    source = "'use strict';\nrun();"
    assert guarded_source("\ufeff" + source, module=False) == guarded_source(source, module=False)
    assert guarded_source(source, module=False).startswith("'use strict';")
