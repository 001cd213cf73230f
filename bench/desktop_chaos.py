"""Hostile X clients against a bound window: Handrail's desktop guard vs a raw pyautogui agent.

Every attack runs twice on the same Xvfb + openbox display, in one run: against Handrail's
desktop backend in this process (observe, the early check, dispatch — what the executor
runs for every write, without its gRPC, authz and ledger around it), and against a raw
pyautogui agent that acts where it last saw its target. The attackers are the clients of
``tests/desktop/attackers.py`` — separate processes with their own X connections — and
each one counts what its own windows received; that count, not what either agent says it
did, is the figure. Attacks:

- another client's active keyboard grab / pointer grab; a passive grab of every key /
  button on the root;
- another client's input-only window inside the target at the point; one covering the
  target under the pointer (keys); an invisible child that takes the focus;
- the target's client dies and another client claims its window id (a restart);
- an overlay that blinks over the point; a target that the window manager keeps moving
  (a decoy under it counts the clicks that miss);
- a dialog of the target's own application that takes its keys at once: opened on a
  typed key (with and without ``_NET_WM_PING``), or by itself mid-typing;
- another application that steals the focus mid-typing (the one character in flight
  counts).

Targets: 0 keys or clicks received outside the bound window for Handrail (the
character in flight at a focus steal included) over every attack but the dialog an
application opens by itself — no client can stop an application from giving its own
dialog a key it already received; there the target is that each such key was reported
in doubt (never counted as typed); every refusal decided within 10 ms (wall clock; the
JSON line also gives how many took longer, the most CPU time this process spent on one
refusal, and the load average, since a refusal that used a fraction of a millisecond of
CPU but took longer waited for a core or for the X server); the guarded
desktop click (the executor's gRPC ``Act``, as ``bench/desktop.py`` measures it) at a p50
within 1.5x today's. Today's is measured in the same run: ``bench/desktop.py`` of the
commit before this change (``--baseline-commit``, default b64a713, unpacked with
``git archive`` and run against its own code), because this machine's load moves a
click's p50 by 2x from one minute to the next. On a quiet machine before the change it
gave 5.44 ms (and 6.06 ms in a second run).

    flock /tmp/handrail-bench.lock python bench/desktop_chaos.py [--rounds 10] [--baseline-commit REV]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.desktop.attackers

from _common import bench_principals, emit, pct, summary

from handrail.authz import AuthzClient
from handrail.executor import ActionKind, ActionSpec, DesktopTarget, ExecutorError, Observation
from handrail.executor._backend import DispatchResult, DispatchStatus, ObserveOptions
from handrail.executor.desktop import X11, DesktopSurface, open_desktop
from handrail.scenarios import VirtualDisplay, start_authz, start_executor
from handrail.scenarios._tkapps import NOTES_LAYOUT, TkApp
from tests.desktop.attackers import Attacker

QUIET_BASELINE_CLICK_P50_MS = 5.44  # bench/desktop.py at b64a713 on a quiet machine, before this change
ROOT = Path(__file__).resolve().parent.parent
PAD = NOTES_LAYOUT["pad"]
TEXT = "quarterly figures attached"
_titles = iter(range(1, 10_000))


def title(prefix: str) -> str:
    return f"{prefix} chaos {os.getpid()}-{next(_titles)}"


@dataclass
class Row:
    attack: str
    handrail: int = 0  # what attacker windows received from Handrail's input
    raw: int = 0  # ... from the raw agent's
    done: int = 0  # Handrail writes that went out
    refused: int = 0  # Handrail writes refused (early or at dispatch)
    in_doubt: int = 0  # characters Handrail reported in doubt (dialogs)
    note: str = ""


@dataclass
class Guard:
    """Handrail's side: a backend bound to one window, acting as the executor would."""

    surface: DesktopSurface
    refusal_ms: list[float] = field(default_factory=list)
    refusal_cpu_ms: list[float] = field(default_factory=list)  # this process's CPU time in each
    gen: int = 0

    def refused(self, started: float, cpu: float) -> None:
        """Record a refusal's decision time (wall clock) and the CPU time this process spent on it."""
        self.refusal_ms.append((time.perf_counter() - started) * 1000)
        self.refusal_cpu_ms.append((time.process_time() - cpu) * 1000)

    async def observe(self) -> Observation:
        raw = await self.surface.observe(ObserveOptions())
        self.gen += 1
        return Observation(f"c:{self.gen}", "c", self.gen, 1, "", raw.title, raw.snapshot, "", 0, desktop=raw.desktop)

    async def act(self, kind: ActionKind, armed: Callable[[], None] | None = None, **kw: Any) -> DispatchResult | None:
        """Observe, check, dispatch; None when refused (its decision time is recorded).

        ``armed`` runs once the early check passed, just before dispatch (an attack that
        must start mid-action).
        """
        t, cpu = time.perf_counter(), time.process_time()
        try:
            obs = await self.observe()
        except ExecutorError:  # the target is gone: observing says so
            self.refused(t, cpu)
            return None
        spec = ActionSpec(kind=kind, observation_id=obs.observation_id, idempotency_key="k", **kw)
        t, cpu = time.perf_counter(), time.process_time()
        if await self.surface.check_fresh(obs, spec, None) is not None:
            self.refused(t, cpu)
            return None
        if armed is not None:
            armed()
        t, cpu = time.perf_counter(), time.process_time()
        result = await self.surface.dispatch(spec, 20_000)
        if result.status is DispatchStatus.NOT_STARTED:
            self.refused(t, cpu)
            return None
        return result


async def bind(app_window: int, display: str) -> Guard:
    s = await open_desktop(DesktopTarget(display=display, window_id=app_window))
    s._x.request_activate(s.window_id)
    for _ in range(300):
        if s._x.active_window() == s.window_id and s._x.is_inside(s._x.input_focus(), s.window_id):
            break
        await asyncio.sleep(0.01)
    return Guard(s)


def activate(display: str, wid: int) -> None:
    x = X11(display)
    try:
        asked = 0.0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if x.active_window() == wid and x.is_inside(x.input_focus(), wid):
                return
            if time.monotonic() - asked > 0.3:
                x.request_activate(wid)
                asked = time.monotonic()
            time.sleep(0.01)
    finally:
        x.close()


def rect(display: str, wid: int) -> tuple[int, int, int, int]:
    x = X11(display)
    try:
        r = x.client_rect(wid)
        return r.x, r.y, r.width, r.height
    finally:
        x.close()


class Bench:
    def __init__(self, display: str, rounds: int) -> None:
        import pyautogui

        self.display = display
        self.rounds = rounds
        self.gui = pyautogui
        pyautogui.PAUSE = 0
        pyautogui.FAILSAFE = False
        self.rows: list[Row] = []
        self.refusal_ms: dict[str, list[float]] = {}
        self.refusal_cpu_ms: list[float] = []

    def pad_root(self, wid: int, dx: int = 0, dy: int = 0) -> tuple[int, int]:
        x, y, _, _ = rect(self.display, wid)
        return x + PAD[0] + PAD[2] // 2 + dx, y + PAD[1] + PAD[3] // 2 + dy

    async def guarded(self, attack: str, wid: int, body: Callable[[Guard], Awaitable[None]]) -> None:
        guard = await bind(wid, self.display)
        try:
            await body(guard)
        finally:
            await self.release(attack, guard)

    # -- one attacker against both agents -------------------------------------------------------

    async def against_both(
        self,
        name: str,
        kind: str,
        options: Callable[[TkApp], tuple[str, ...]],
        action: str,
        *,
        count: str = "keys",
    ) -> Row:
        """A Tk notes app as the target, bound first; then the attacker, started once per side."""
        row = Row(name)
        x, y = PAD[0] + PAD[2] // 2, PAD[1] + PAD[3] // 2
        for side in ("handrail", "raw"):
            with TkApp("notes", self.display, title=title("Notes")) as app:
                wid = app.window_id()
                activate(self.display, wid)
                self.gui.moveTo(*self.pad_root(wid))  # the pointer rests over the target
                guard = await bind(wid, self.display) if side == "handrail" else None
                try:
                    with Attacker(kind, self.display, *options(app)) as attacker:
                        time.sleep(0.2)
                        for _ in range(self.rounds):
                            if guard is None:
                                self.gui.write(TEXT) if action == "type" else self.gui.click(*self.pad_root(wid))
                                continue
                            if action == "type":
                                result = await guard.act(ActionKind.TYPE, text=TEXT)
                            else:
                                result = await guard.act(ActionKind.CLICK, x=x, y=y)
                            row.done += result is not None
                            row.refused += result is None
                        time.sleep(0.2)
                        setattr(row, side, int(attacker.stop()[count]))
                finally:
                    if guard is not None:
                        await self.release(name, guard)
        self.rows.append(row)
        return row

    async def release(self, attack: str, guard: Guard) -> None:
        self.refusal_ms.setdefault(attack, []).extend(guard.refusal_ms)
        self.refusal_cpu_ms.extend(guard.refusal_cpu_ms)
        await guard.surface.close()

    async def grabs_and_children(self) -> None:
        await self.against_both("keyboard grab", "grab-keyboard", lambda app: (), "type")
        await self.against_both("pointer grab", "grab-pointer", lambda app: (), "click", count="buttons")
        await self.against_both("passive key grab on the root", "passive-key", lambda app: (), "type")
        await self.against_both(
            "passive button grab on the root", "passive-button", lambda app: (), "click", count="buttons"
        )
        pad = f"{PAD[0]},{PAD[1]},{PAD[2]},{PAD[3]}"
        await self.against_both(
            "input-only window of another client over the point",
            "child",
            lambda app: ("--parent", hex(app.window_id()), "--geometry", pad, "--input-only"),
            "click",
            count="buttons",
        )
        await self.against_both(
            "input-only window of another client under the pointer",
            "child",
            lambda app: ("--parent", hex(app.window_id()), "--geometry", "0,0,480,360", "--input-only"),
            "type",
        )
        await self.against_both(
            "invisible child of another client with the focus",
            "child",
            lambda app: ("--parent", hex(app.window_id()), "--geometry", "0,0,8,8", "--focus"),
            "type",
        )

    async def id_reuse(self) -> None:
        """The target's client dies; another client claims the very window id and the title."""
        row = Row("window id reused after a restart")
        for side in ("handrail", "raw"):
            name = title("Victim")
            victim = TkApp("notes", self.display, title=name).start()
            wid = victim.window_id()
            activate(self.display, wid)
            guard = await bind(wid, self.display) if side == "handrail" else None
            assert victim.proc is not None
            victim.proc.kill()
            victim.proc.wait(5)
            victim.stop()
            try:
                with Attacker("reuse", self.display, "--window", hex(wid), "--title", name) as impostor:
                    activate(self.display, wid)
                    for _ in range(self.rounds):
                        if guard is not None:
                            result = await guard.act(ActionKind.TYPE, text=TEXT)
                            row.done += result is not None
                            row.refused += result is None
                        else:
                            X11(self.display).request_activate(wid)  # the raw agent finds "its" window by id
                            self.gui.write(TEXT)
                    time.sleep(0.2)
                    setattr(row, side, int(impostor.stop()["keys"]))
            finally:
                if guard is not None:
                    await self.release(row.attack, guard)
        self.rows.append(row)

    async def races(self) -> None:
        """A blinking overlay over the point; a target moved over a decoy."""
        for name, kind in (("blinking overlay", "blink"), ("moving target", "mover")):
            row = Row(name)
            for side in ("handrail", "raw"):
                with TkApp("notes", self.display, title=title("Notes")) as app:
                    wid = app.window_id()
                    activate(self.display, wid)
                    x, y, w, h = rect(self.display, wid)
                    if kind == "blink":
                        options: tuple[str, ...] = (f"--geometry={x + PAD[0]},{y + PAD[1]},{PAD[2]},{PAD[3]}",)
                        options += ("--period-ms", "2.5")
                        point = (PAD[0] + PAD[2] // 2, PAD[1] + PAD[3] // 2)
                    else:
                        decoy = f"{x - 200},{y - 100},{w + 400},{h + 200}"
                        options = ("--window", hex(wid), "--dx", "60", "--period-ms", "2", f"--geometry={decoy}")
                        point = (PAD[0] + 4, PAD[1] + 30)
                    with Attacker(kind, self.display, *options) as attacker:
                        time.sleep(0.2)
                        wanted = 10 * self.rounds
                        if side == "handrail":

                            async def body(
                                guard: Guard, point: tuple[int, int] = point, row: Row = row, wanted: int = wanted
                            ) -> None:
                                for _ in range(wanted * 20):
                                    result = await guard.act(ActionKind.CLICK, x=point[0], y=point[1])
                                    row.done += result is not None
                                    row.refused += result is None
                                    if row.done >= wanted:
                                        break

                            await self.guarded(name, wid, body)
                        else:
                            for _ in range(wanted):
                                self.gui.click(x + point[0], y + point[1])  # where it saw the target
                                time.sleep(0.004)
                        time.sleep(0.2)
                        setattr(row, side, int(attacker.stop()["buttons"]))
            self.rows.append(row)

    async def dialogs(self) -> None:
        """The target application's own dialog takes its keys the moment it opens."""
        cases = (
            ("same-app dialog opened on a key (_NET_WM_PING)", (), "trigger"),
            ("same-app dialog opened on a key (no ping)", ("--no-ping",), "trigger"),
            ("same-app dialog opened by itself mid-typing", (), "spontaneous"),
        )
        text = "abc!" + TEXT * 2
        for name, extra, how in cases:
            row = Row(name)
            for side in ("handrail", "raw"):
                for _ in range(max(1, self.rounds // 2)):
                    options = ("--title", title("App"), *extra) + (("--trigger", "!") if how == "trigger" else ())
                    with Attacker("dialog-app", self.display, *options) as app:
                        activate(self.display, app.window)
                        # The dialog opens by itself while the text is being typed.
                        arm = (lambda a=app: a.command("dialog-in 40")) if how == "spontaneous" else None
                        if side == "handrail":

                            async def body(guard: Guard, row: Row = row, arm: Any = arm) -> None:
                                result = await guard.act(ActionKind.TYPE, text=text, key_delay_ms=2, armed=arm)
                                row.done += result is not None
                                row.refused += result is None
                                if result is not None and "it is not counted" in result.message:
                                    row.in_doubt += 1

                            await self.guarded(name, app.window, body)
                        else:
                            self.gui.write(text, interval=0.002)
                        time.sleep(0.3)
                        log = app.stop()
                    setattr(row, side, getattr(row, side) + len(str(log.get("dialog", ""))))
            if how == "spontaneous":
                row.note = "received <= in doubt: the application routes a key it already has"
            self.rows.append(row)

    async def focus_steal(self) -> None:
        """Another application takes the focus mid-typing; the character in flight counts."""
        row = Row("focus stolen mid-typing")
        text = TEXT * 8
        for side in ("handrail", "raw"):
            for _ in range(max(1, self.rounds // 2)):
                with (
                    TkApp("notes", self.display, title=title("Notes")) as notes,
                    TkApp("thief", self.display, title=title("Thief")) as thief,
                ):
                    thief.window_id()
                    activate(self.display, notes.window_id())

                    def arm(thief: TkApp = thief) -> None:
                        thief.command("steal-in 60")  # while the text is being typed

                    if side == "handrail":

                        async def body(guard: Guard, row: Row = row, arm: Any = arm) -> None:
                            result = await guard.act(ActionKind.TYPE, text=text, key_delay_ms=2, armed=arm)
                            row.done += result is not None
                            row.refused += result is None

                        await self.guarded(row.attack, notes.window_id(), body)
                    else:
                        arm()
                        self.gui.write(text, interval=0.002)
                    stolen = len(thief.settled_state()["text"])
                setattr(row, side, getattr(row, side) + stolen)
        self.rows.append(row)


def guarded_clicks(display: str, n: int) -> list[float]:
    """The executor's gRPC Act click (skip_reobserve), as bench/desktop.py measures it."""
    from desktop import guarded  # bench/desktop.py

    with tempfile.TemporaryDirectory() as tmp, TkApp("notes", display, title=title("Bench notes")) as app:
        data = Path(tmp)
        tokens = bench_principals(data)
        activate(display, app.window_id())
        authz = start_authz(data)
        executor = start_executor(data, authz.address, tokens["exec"])
        try:
            with AuthzClient(authz.address, tokens["ops"]) as ops:
                ops.grant("bench-agent", "desktop:bench", ["submit", "input"], [])
            _, clicks, _ = guarded(executor.address, tokens["agent"], app, n)
        finally:
            executor.stop()
            authz.stop()
    return clicks


_SITECUSTOMIZE = """import sys
# Run the code of this tree, not the editable install of the current worktree.
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in getattr(h, "__module__", "")]
sys.path_importer_cache.clear()
"""


def todays_click(commit: str, n: int) -> float:
    """The guarded click p50 of ``commit``'s own code and ``bench/desktop.py``, run now."""
    with tempfile.TemporaryDirectory(prefix="handrail-baseline-") as tmp:
        src, tree = Path(tmp) / "src", Path(tmp) / "tree"
        src.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
        package = tree / "handrail"
        package.mkdir(parents=True)
        for item in (src / "handrail").iterdir():
            (package / item.name).symlink_to(item)
        for name in ("executor", "authz", "recorder", "proto", "scenarios"):
            (package / name).symlink_to(src / name)
        (tree / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        env = {**os.environ, "PYTHONPATH": str(tree)}
        env.pop("DISPLAY", None)
        run = subprocess.run(
            [sys.executable, str(src / "bench" / "desktop.py"), "--n", str(n)],
            cwd=tmp,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        figures = json.loads(run.stdout.strip().splitlines()[-1])
        return float(figures["guarded_click_p50_ms"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10, help="actions per attack and side")
    ap.add_argument("--n", type=int, default=150, help="guarded clicks for the p50")
    ap.add_argument("--baseline-commit", default="b64a713", help="the code before this change")
    args = ap.parse_args()
    today = todays_click(args.baseline_commit, args.n)
    with VirtualDisplay() as vd:
        os.environ["DISPLAY"] = vd.display  # pyautogui, the attackers and the executor process
        bench = Bench(vd.display, args.rounds)
        started = time.perf_counter()
        asyncio.run(bench.grabs_and_children())
        asyncio.run(bench.id_reuse())
        asyncio.run(bench.races())
        asyncio.run(bench.dialogs())
        asyncio.run(bench.focus_steal())
        attacks_s = time.perf_counter() - started
        clicks = guarded_clicks(vd.display, args.n)
    today_after = todays_click(args.baseline_commit, args.n)  # before and after: the load moves
    today = (today + today_after) / 2

    width = max(len(r.attack) for r in bench.rows)
    print(f"{'attack':<{width}}  handrail  raw  (handrail: done / refused / in doubt)")
    for r in bench.rows:
        extra = f"  {r.note}" if r.note else ""
        print(f"{r.attack:<{width}}  {r.handrail:>8}  {r.raw:>3}  ({r.done} / {r.refused} / {r.in_doubt}){extra}")
    every_refusal = [ms for samples in bench.refusal_ms.values() for ms in samples]
    slowest = {attack: round(max(samples), 3) for attack, samples in bench.refusal_ms.items() if samples}
    spontaneous = [r for r in bench.rows if "by itself" in r.attack]
    guarded_rows = [r for r in bench.rows if r not in spontaneous]
    figures: dict[str, Any] = {
        "rounds": args.rounds,
        "attacks_s": round(attacks_s, 1),
        "handrail_received": sum(r.handrail for r in guarded_rows),
        "raw_received": sum(r.raw for r in guarded_rows),
        "handrail_received_by_attack": {r.attack: r.handrail for r in bench.rows},
        "raw_received_by_attack": {r.attack: r.raw for r in bench.rows},
        "spontaneous_dialog_received": sum(r.handrail for r in spontaneous),
        "spontaneous_dialog_in_doubt": sum(r.in_doubt for r in spontaneous),
        "refusals": len(every_refusal),
        "refusal_p50_ms": round(pct(every_refusal, 50), 3),
        "refusal_p99_ms": round(pct(every_refusal, 99), 3),
        "refusal_max_ms": round(max(every_refusal), 3),
        "refusal_max_ms_by_attack": slowest,
        # The refusals over 10 ms and the most CPU time this process spent on any refusal:
        # a slow refusal that used little CPU waited for a core (or for the X server's).
        "refusals_over_10ms": sum(ms > 10.0 for ms in every_refusal),
        "refusal_cpu_max_ms": round(max(bench.refusal_cpu_ms), 3),
        "load_average_1min": round(os.getloadavg()[0], 1),
        "today_click_p50_ms": round(today, 3),
        "quiet_baseline_click_p50_ms": QUIET_BASELINE_CLICK_P50_MS,
        **summary("guarded_click", clicks),
    }
    targets = {
        "handrail_received": 0,
        "spontaneous_dialog_received": "<= spontaneous_dialog_in_doubt",
        "refusal_max_ms": 10.0,
        "guarded_click_p50_ms": "<= 1.5 x today_click_p50_ms",
    }
    met = (
        figures["handrail_received"] == 0
        and figures["spontaneous_dialog_received"] <= figures["spontaneous_dialog_in_doubt"]
        and figures["refusal_max_ms"] <= 10.0
        and figures["guarded_click_p50_ms"] <= 1.5 * today
    )
    print(
        f"received outside the bound window: Handrail {figures['handrail_received']}, "
        f"raw pyautogui {figures['raw_received']}; refusals {figures['refusals']}, "
        f"p50 {figures['refusal_p50_ms']} ms, max {figures['refusal_max_ms']} ms "
        f"({figures['refusals_over_10ms']} over 10 ms; CPU at most {figures['refusal_cpu_max_ms']} ms); guarded click p50 "
        f"{figures['guarded_click_p50_ms']} ms (today's code, same run: {figures['today_click_p50_ms']} ms)"
    )
    emit("desktop_chaos", figures, targets, met)


if __name__ == "__main__":
    main()
