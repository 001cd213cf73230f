"""Replay a recorded Gemini computer-use conversation against a guarded browser (no network).

Each ``function_call`` goes through ``GeminiComputer``: its 0-999 grid point mapped to the
viewport, performed as a guarded pixel action, answered by the ``function_response`` a live
loop would send back (the URL, the screenshot, and ``safety_acknowledgement`` only after an
operator approved an action the model's ``safety_decision`` asked confirmation for).

    python examples/computer_use/gemini_loop.py --executor 127.0.0.1:7701 --token $AGENT_TOKEN \\
        --target browser:plans --url http://127.0.0.1:8000

Exit codes: 0 every call ran (confirmations acknowledged after an approval); 1 one did not;
3 the session failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from handrail.adapters import GeminiComputer, GuardedComputer
from handrail.executor import ExecutorClient, ExecutorError

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("executor", "token", "target", "url"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--conversation", default=str(HERE / "gemini_conversation.json"))
    args = parser.parse_args(argv)
    recorded = json.loads(Path(args.conversation).read_text().replace("{base}", args.url))
    try:
        with ExecutorClient(args.executor, args.token) as client:
            session = client.open_session(target=args.target, start_url=args.url + recorded["path"])
            gemini = GeminiComputer(GuardedComputer(session))
            failed = 0
            for turn in recorded["turns"]:
                for part in turn["parts"]:
                    if "text" in part:
                        print(f"gemini: {part['text']}")
                        continue
                    call = part["function_call"]
                    confirm = (call["args"].get("safety_decision") or {}).get("decision") == "require_confirmation"
                    if confirm:
                        print(f"  {call['name']}: confirmation required; waiting for an operator's approval")
                    done = gemini.run(call)
                    acked = done.response["response"].get("safety_acknowledgement") == "true"
                    print(f"  {call['name']}: {done.step.message}" + (" (acknowledged)" if acked else ""))
                    failed += (not done.step.ok) or (confirm and not acked)
            session.close()
    except ExecutorError as exc:
        print(f"the session failed: {exc}", file=sys.stderr)
        return 3
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
