"""The destructive classification: an element's name AND its context, in several languages.

The classifier is pure (``authz._risk``); the sidecar puts its answer in Cedar's context,
where the shipped ``destructive-needs-delete-grant`` reads it. Precision and recall on
the whole labelled corpus are in ``bench/destructive.py``; here the corpus's main block
must stay above the bench's targets, and the cases of the issue hold exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from handrail.authz import ElementContext
from handrail.authz._risk import RiskClass, RiskInput, classify
from tests.authz.conftest import Sidecar

CORPUS = Path(__file__).resolve().parent / "data" / "destructive_corpus.yaml"
TARGET = "browser:1"
ORIGIN = "http://127.0.0.1:8000"


def _corpus() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    return rows


def _input(row: dict[str, Any]) -> RiskInput:
    return RiskInput(
        row["label"],
        row.get("role", "button"),
        row.get("dialog", ""),
        row.get("form", ""),
        row.get("heading", ""),
        row.get("description", ""),
    )


def test_the_corpus_is_large_and_in_several_languages() -> None:
    rows = _corpus()
    assert len(rows) >= 150
    by_lang = {lang: sum(1 for r in rows if r["lang"] == lang) for lang in {r["lang"] for r in rows}}
    assert by_lang["en"] >= 100 and sum(1 for n in by_lang.values() if n >= 20) >= 3, by_lang
    assert {r["class"] for r in rows} == {"destructive", "none"}


def test_precision_and_recall_on_the_corpus() -> None:
    tp = fp = fn = 0
    for row in _corpus():
        if row.get("heldout"):
            continue
        got = classify(_input(row)) is RiskClass.DESTRUCTIVE
        want = row["class"] == "destructive"
        tp += got and want
        fp += got and not want
        fn += want and not got
    assert tp / (tp + fp) >= 0.9 and tp / (tp + fn) >= 0.95, (tp, fp, fn)


@pytest.mark.parametrize(
    ("name", "context", "destructive"),
    [
        ("Yes", {"dialog_title": "Close your account?"}, True),
        ("Confirm", {"description": "Your account will be permanently deleted"}, True),
        ("OK", {"dialog_title": "Remove this member?"}, True),
        ("Ja", {"dialog_title": "Konto wirklich löschen?"}, True),
        ("确定", {"dialog_title": "确定要注销账号吗\uff1f"}, True),
        ("Terminate membership", {}, True),
        ("Kündigen", {}, True),
        ("Résilier l'abonnement", {}, True),
        ("Cancel", {"dialog_title": "Delete this repository?"}, False),
        ("Keep my account", {"dialog_title": "Close your account?"}, False),
        ("Yes", {"dialog_title": "Enable notifications?"}, False),
        ("Pause plan", {"heading": "Your plan"}, False),
        ("Remove filter", {}, False),
        ("Don't delete", {}, False),
        # an aria-label over other words: either one reading destructive is enough
        ("Save changes", {"visible_text": "Delete account"}, True),
        ("Cancel", {"visible_text": "Delete account"}, True),
        ("Close", {"visible_text": "\u00d7"}, False),
        ("Save changes", {"visible_text": "Save"}, False),
    ],
)
def test_the_name_and_the_context_decide(name: str, context: dict[str, str], destructive: bool) -> None:
    got = classify(RiskInput(name, "button", **context))
    assert (got is RiskClass.DESTRUCTIVE) == destructive


def test_the_sidecar_forbids_a_generic_confirm_in_a_destructive_dialog(sidecar: Sidecar) -> None:
    """Class 4: a "Yes" whose dialog says what it confirms needs a delete grant."""
    epoch = sidecar.client("exe").acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
    op = sidecar.client("op")
    op.grant("agent-a", TARGET, ["input", "submit"], [ORIGIN])
    exe = sidecar.client("exe")

    def check(name: str, context: ElementContext) -> Any:
        return exe.check(
            "agent-a", TARGET, epoch, "submit", url=ORIGIN + "/account", element_role="button",
            element_name=name, context=context,
        )  # fmt: skip

    closing = ElementContext(dialog_title="Close your account?", description="All your data will be erased")
    refused = check("Yes", closing)
    assert refused.reason == "POLICY_FORBID" and refused.policies == ("destructive-needs-delete-grant",)
    assert check("Yes", ElementContext(dialog_title="Enable notifications?")).allow
    assert check("Terminate membership", ElementContext()).reason == "POLICY_FORBID"
    # a name given by aria-label over what the button shows: both are read, and logged
    shown = ElementContext(visible_text="Delete account")
    masked = check("Save changes", shown)
    assert masked.reason == "POLICY_FORBID" and masked.policies == ("destructive-needs-delete-grant",)
    assert op.explain_decision(masked.decision_id)[0].request.context == shown
    # the logged decision keeps the context it was judged on
    record, _ = op.explain_decision(refused.decision_id)
    assert record.request.context == closing
    op.grant("agent-a", TARGET, ["submit", "delete"], [ORIGIN])
    assert check("Yes", closing).allow
