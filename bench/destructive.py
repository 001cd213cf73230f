"""The destructive classification: precision and recall on a labelled corpus of real controls.

The corpus (``tests/authz/data/destructive_corpus.yaml``) holds control labels from the
account, billing and settings pages of well-known services, in English, German, French,
Spanish and Chinese, each with its context (dialog title, form, heading, description) and
the class a person expects. The classifier (``handrail.authz._risk``) is measured beside
the baseline it replaces: the shipped policy's list of name patterns (``*delete*``,
``remove*``, ``*close account*`` ...), which reads the name only and in English only.

Targets, on the whole corpus: recall on destructive controls >= 0.95 (a destructive
control that passes as harmless goes through under an ``input, submit`` grant: the miss
is the costly error), precision >= 0.9 (a harmless control taken for destructive is only
refused until an operator grants ``delete``: a cost, not a harm, but too many make the
rule useless). The held-out block (written after the vocabulary was fixed, never tuned
on) is reported apart, without a target.

    flock /tmp/handrail-bench.lock .venv/bin/python bench/destructive.py
"""

from __future__ import annotations

import fnmatch
import json
import time
from pathlib import Path
from typing import Any

import yaml

from handrail.authz._risk import RiskClass, RiskInput, classify

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "authz" / "data" / "destructive_corpus.yaml"
# The patterns of the policy shipped before this classifier (authz/policies/default.cedar).
BASELINE = (
    "*delete*",
    "remove*",
    "*close account*",
    "*close my account*",
    "*deactivate account*",
    "*cancel subscription permanently*",
    "*permanently*",
    "*erase*",
)


def _baseline(row: dict[str, Any]) -> bool:
    name = str(row["label"]).lower()
    return any(fnmatch.fnmatchcase(name, p) for p in BASELINE)


def _ours(row: dict[str, Any]) -> bool:
    element = RiskInput(
        row["label"],
        row.get("role", "button"),
        row.get("dialog", ""),
        row.get("form", ""),
        row.get("heading", ""),
        row.get("description", ""),
    )
    return classify(element) is RiskClass.DESTRUCTIVE


def _score(rows: list[dict[str, Any]], judge: Any) -> dict[str, Any]:
    tp = fp = fn = tn = 0
    missed: list[str] = []
    for row in rows:
        got, want = judge(row), row["class"] == "destructive"
        tp += got and want
        fp += got and not want
        fn += want and not got
        tn += not got and not want
        if got != want:
            missed.append(f"{'FP' if got else 'FN'} [{row['lang']}] {row['label']!r}")
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return {
        "precision": round(precision, 3),
        "recall": round(recall, 3),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "missed": missed,
    }


def main() -> None:
    rows: list[dict[str, Any]] = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    held = [r for r in rows if r.get("heldout")]
    langs = sorted({r["lang"] for r in rows})
    ours, base = _score(rows, _ours), _score(rows, _baseline)
    t0 = time.perf_counter()
    for _ in range(5):
        for row in rows:
            _ours(row)
    per_label_us = (time.perf_counter() - t0) / (5 * len(rows)) * 1e6
    counts = ", ".join(f"{lang} {sum(1 for r in rows if r['lang'] == lang)}" for lang in langs)
    print(f"corpus: {len(rows)} labels ({counts})")
    for name, score in (("classifier", ours), ("baseline (name patterns)", base)):
        print(
            f"{name:>26}: precision {score['precision']:.3f}  recall {score['recall']:.3f}  (tp {score['tp']} fp {score['fp']} fn {score['fn']} tn {score['tn']})"
        )
    for lang in langs:
        part = [r for r in rows if r["lang"] == lang]
        s, b = _score(part, _ours), _score(part, _baseline)
        print(f"{lang:>26}: recall {s['recall']:.3f} (baseline {b['recall']:.3f}), precision {s['precision']:.3f}")
    heldout = _score(held, _ours)
    print(
        f"{'held-out block':>26}: precision {heldout['precision']:.3f}  recall {heldout['recall']:.3f} ({len(held)} labels)"
    )
    for line in ours["missed"]:
        print("  classifier", line)
    print(f"classifying one label: {per_label_us:.1f} µs")
    targets = {"recall": 0.95, "precision": 0.9}
    met = ours["recall"] >= targets["recall"] and ours["precision"] >= targets["precision"]
    figures = {
        "labels": len(rows),
        "languages": langs,
        "precision": ours["precision"],
        "recall": ours["recall"],
        "baseline_precision": base["precision"],
        "baseline_recall": base["recall"],
        "heldout_precision": heldout["precision"],
        "heldout_recall": heldout["recall"],
        "per_label_us": round(per_label_us, 1),
    }
    print(json.dumps({"bench": "destructive", **figures, "targets": targets, "met": met}))


if __name__ == "__main__":
    main()
