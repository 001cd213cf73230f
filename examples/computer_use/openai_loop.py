"""Replay a recorded OpenAI computer-use conversation against a guarded browser (no network).

Each ``computer_call`` goes through ``OpenAIComputer``: its batched actions as guarded pixel
actions, its ``pending_safety_checks`` as operator approvals asked of the Handrail sidecar
(``handrail approvals`` / ``handrail approve ID``): ``acknowledged_safety_checks`` is sent back
only once an operator approved.

    python examples/computer_use/openai_loop.py --executor 127.0.0.1:7701 --token $AGENT_TOKEN \\
        --target browser:plans --url http://127.0.0.1:8000

Exit codes: 0 every call ran (and every safety check was acknowledged after an approval);
1 one did not; 3 the session failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from handrail.adapters import GuardedComputer, OpenAIComputer
from handrail.executor import ExecutorClient, ExecutorError

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("executor", "token", "target", "url"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--conversation", default=str(HERE / "openai_conversation.json"))
    args = parser.parse_args(argv)
    recorded = json.loads(Path(args.conversation).read_text())
    tool = recorded["tool"]
    try:
        with ExecutorClient(args.executor, args.token) as client:
            session = client.open_session(target=args.target, start_url=args.url + recorded["path"])
            openai = OpenAIComputer(GuardedComputer(session), (tool["display_width"], tool["display_height"]))
            assert openai.tool() == tool, (openai.tool(), tool)
            failed = 0
            for item in recorded["turns"]:
                if item["type"] == "message":
                    print("model: " + " ".join(c["text"] for c in item["content"]))
                    continue
                if item["pending_safety_checks"]:
                    print(f"  {item['call_id']}: safety checks pending; waiting for an operator's approval")
                turn = openai.run(item)
                acked = [c["id"] for c in turn.output.get("acknowledged_safety_checks", [])]
                print(f"  {item['call_id']}: {turn.message}" + (f" (acknowledged {', '.join(acked)})" if acked else ""))
                missing = bool(item["pending_safety_checks"]) and not acked
                failed += (not turn.ok) or missing
            session.close()
    except ExecutorError as exc:
        print(f"the session failed: {exc}", file=sys.stderr)
        return 3
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
