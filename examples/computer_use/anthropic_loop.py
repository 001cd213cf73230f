"""Replay a recorded Claude computer-use conversation against a guarded browser (no network).

Each ``tool_use`` block of the model's turns goes through ``AnthropicComputer``: a guarded
pixel action of a Handrail session, answered by the ``tool_result`` block a live loop would
send back to the Messages API (text and the next screenshot, at the display's scale).

    python examples/computer_use/anthropic_loop.py --executor 127.0.0.1:7701 --token $AGENT_TOKEN \\
        --target browser:plans --url http://127.0.0.1:8000

Exit codes: 0 every tool call ran; 1 one did not (its text says why); 3 the session failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from handrail.adapters import AnthropicComputer, GuardedComputer
from handrail.executor import ExecutorClient, ExecutorError

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("executor", "token", "target", "url"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--conversation", default=str(HERE / "anthropic_conversation.json"))
    args = parser.parse_args(argv)
    recorded = json.loads(Path(args.conversation).read_text())
    tool = recorded["tool"]
    try:
        with ExecutorClient(args.executor, args.token) as client:
            session = client.open_session(target=args.target, start_url=args.url + recorded["path"])
            viewport = session.latest.viewport_width if session.latest else 1280
            computer = GuardedComputer(session, approval_wait_ms=60_000)
            claude = AnthropicComputer(computer, tool["type"], scale=tool["display_width_px"] / viewport)
            assert claude.tool() == tool, (claude.tool(), tool)  # the display the model was told
            failed = 0
            for turn in recorded["turns"]:
                for block in turn["content"]:
                    if block["type"] == "text":
                        print(f"claude: {block['text']}")
                    elif block["type"] == "tool_use":
                        result = claude.run(block)
                        text = result["content"][0]["text"]
                        print(f"  {block['input']['action']}: {'ERROR ' if result.get('is_error') else ''}{text}")
                        failed += bool(result.get("is_error"))
            session.close()
    except ExecutorError as exc:
        print(f"the session failed: {exc}", file=sys.stderr)
        return 3
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
