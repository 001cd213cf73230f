"""``handrail demo --console``: run it as a user would, and be the person at the console."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from handrail.scenarios import SECOND_FACTOR_CODE
from handrail.scenarios._console_driver import ConsoleDriver

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_the_console_demo_waits_for_a_person_who_types_the_code(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "handrail", "demo", "--console", "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if "waiting up to" in line:
                ready.set()
        ready.set()

    pumping = threading.Thread(target=pump, daemon=True)
    pumping.start()
    try:
        assert ready.wait(120), "\n".join(lines)
        text = "\n".join(lines)
        url = re.search(r"OPERATOR CONSOLE: (\S+)/", text)
        token = re.search(r"with the token: (\S+)", text)
        assert url and token, text
        person = ConsoleDriver(url.group(1), token.group(1))
        page = person.page("/")
        session_id = re.search(r"/sessions/(s_[0-9a-f]+)", page)
        target = re.search(r'name="target" value="([^"]+)"', page)
        assert session_id and target and "Enter the code sent to your phone" in page
        sid = session_id.group(1)
        epoch = person.call("POST", "/takeover", {"target": target.group(1)})["epoch"]
        query = urllib.parse.urlencode({"role": "textbox", "name": "Code"})
        box = person.call("GET", f"/api/sessions/{sid}/locate?{query}")
        for data in (
            {"kind": "click", "x": box["x"] + 5, "y": box["y"] + 5},
            {"kind": "type", "text": SECOND_FACTOR_CODE},
            {"kind": "press", "key": "Enter"},
        ):
            answer = person.call("POST", f"/sessions/{sid}/input", {**data, "epoch": epoch})
            assert answer.get("outcome") == "DONE", answer
        time.sleep(0.5)
        back = person.call("POST", "/handback", {"target": target.group(1), "to": "demo-agent"})
        assert "error" not in back, back
        assert proc.wait(120) == 0, "\n".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        pumping.join(10)
        assert proc.stdout is not None
        proc.stdout.close()
    text = "\n".join(lines)
    assert "console demo passed" in text and "[FAIL]" not in text, text
