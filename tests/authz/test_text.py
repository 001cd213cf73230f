"""Text as a reader sees it: the names the risk classifier and the policies match in."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handrail.authz._risk import RiskClass, RiskInput, classify
from handrail.authz._text import CF_PLANES, fold, fold_words
from handrail.scenarios._plans import DISGUISES


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("Dele\u200bte account", "delete account"),  # zero-width space
        ("De\u00adlete", "delete"),  # soft hyphen
        ("Del\u200dete\ufeff", "delete"),  # zero-width joiner, byte order mark
        ("Del\u2060ete\u034f", "delete"),  # word joiner, combining grapheme joiner
        ("D\u0435l\u0435t\u0435", "delete"),  # Cyrillic e
        ("\u0420\u0410\u0423", "pay"),  # Cyrillic capitals
        ("\u03a1\u0391\u03a5", "pay"),  # Greek capitals
        ("\uff32\uff45\uff4d\uff4f\uff56\uff45", "remove"),  # fullwidth
        ("\U0001d42b\U0001d41e\U0001d426\U0001d428\U0001d42f\U0001d41e", "remove"),  # mathematical bold
        ("\u202etnuocca eteleD\u202c", "delete account"),  # right-to-left override
        ("a\u202eyap\u202c b", "apay b"),
        ("\u202eetirw", "write"),  # an override never popped runs to the end
        ("Plain ASCII", "plain ascii"),
    ],
)
def test_fold_reads_what_is_shown(written: str, read: str) -> None:
    assert fold(written) == read


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("D e l e t e account", "delete account"),
        ("D-E-L-E-T-E", "delete"),
        ("r.e.m.o.v.e  now", "remove now"),
        ("W i p e", "wipe"),
        ("A B", "a b"),  # two single letters are not a word spelled out
        ("Straße", "strasse"),
        ("  Keep   my\tplan ", "keep my plan"),
    ],
)
def test_fold_words_joins_letters_spaced_apart(written: str, read: str) -> None:
    assert fold_words(written) == read


@pytest.mark.parametrize("kind", sorted(DISGUISES))
def test_every_disguise_of_the_fixture_is_destructive(kind: str) -> None:
    assert classify(RiskInput(DISGUISES[kind], "button")) is RiskClass.DESTRUCTIVE


@pytest.mark.parametrize("name", ["Don\u200bt delete", "N o t  n o w", "C\u0430ncel", "Ke\u0435p my account"])
def test_disguised_ways_out_stay_safe(name: str) -> None:
    assert classify(RiskInput(name, "button", dialog_title="Delete this repository?")) is RiskClass.NONE


def test_the_format_characters_lie_where_the_table_looks() -> None:
    everywhere = {c for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"}
    looked_at = {c for plane in CF_PLANES for c in plane if unicodedata.category(chr(c)) == "Cf"}
    assert everywhere == looked_at and len(everywhere) > 150


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)))
def test_ascii_is_only_lowercased(text: str) -> None:
    assert fold(text) == text.lower()
    assert fold_words(text) == fold_words(text + "\u200b")  # the slow path agrees


@given(st.text())
def test_fold_leaves_nothing_invisible_and_is_idempotent(text: str) -> None:
    folded = fold(text)
    assert not any(unicodedata.category(c) == "Cf" for c in folded)
    assert fold(folded) == folded
