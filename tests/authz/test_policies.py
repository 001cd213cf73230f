"""Loading Cedar policies: errors carry FILE:LINE; forbids are reported by @id."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from handrail.authz import PolicyEngine, PolicyError
from handrail.authz._core import CheckInput
from handrail.authz._policies import DEFAULT_POLICIES_DIR, split_statements

GOOD = '@id("a")\nforbid (principal, action == Action::"upload", resource);\n'


def _dir(tmp_path: Path, text: str, name: str = "extra.cedar") -> Path:
    d = tmp_path / "policies"
    d.mkdir()
    shutil.copy(DEFAULT_POLICIES_DIR / "schema.cedarschema", d)
    (d / name).write_text(text)
    return d


def test_shipped_policies_load() -> None:
    engine = PolicyEngine.load()
    assert engine.policy_ids == (
        "password-needs-explicit-grant",
        "destructive-needs-delete-grant",
        "navigate-only-to-granted-origins",
        "agents-never-reach-the-console",
        "documents-load-only-from-granted-origins",
    )


def test_parse_error_names_file_and_line(tmp_path: Path) -> None:
    text = (
        GOOD
        + "\n// a comment; with a semicolon\n"
        + '@id("b")\nforbid (principal, action, resource)\n  when { context. };\n'
    )
    d = _dir(tmp_path, text)
    with pytest.raises(PolicyError) as err:
        PolicyEngine.load(d)
    assert str(err.value).startswith(f"{d / 'extra.cedar'}:5: ")
    assert err.value.line == 5


def test_validation_error_names_file_and_line(tmp_path: Path) -> None:
    text = GOOD + '\n@id("b")\nforbid (principal, action, resource) when { context.nope };\n'
    d = _dir(tmp_path, text)
    with pytest.raises(PolicyError, match=r"extra\.cedar:4: .*nope"):
        PolicyEngine.load(d)


def test_missing_id_is_an_error(tmp_path: Path) -> None:
    d = _dir(tmp_path, GOOD + "\n\nforbid (principal, action, resource);\n")
    with pytest.raises(PolicyError, match=r"extra\.cedar:5: .*@id"):
        PolicyEngine.load(d)


def test_duplicate_id_is_an_error(tmp_path: Path) -> None:
    d = _dir(tmp_path, GOOD + GOOD)
    with pytest.raises(PolicyError, match=r"extra\.cedar:3: .*twice"):
        PolicyEngine.load(d)


def test_custom_forbid_is_reported_by_id(tmp_path: Path) -> None:
    engine = PolicyEngine.load(_dir(tmp_path, GOOD))
    result = engine.evaluate(CheckInput("a", "t", 1, "upload"), "")
    assert result.forbidden and result.policies == ("a",)
    assert not engine.evaluate(CheckInput("a", "t", 1, "download"), "").forbidden


def test_split_statements_ignores_strings_and_comments() -> None:
    text = '// x;\n@id("a;b")\npermit (principal, action, resource)\nwhen { "x;" == "x;" };\n\n  // tail\n'
    stmts = split_statements(text)
    assert len(stmts) == 1 and stmts[0].line == 2


def test_element_name_lower_is_the_name_as_read(tmp_path: Path) -> None:
    # A policy on the lowercased name meets the name however it is written to look the
    # same: Cyrillic look-alikes, fullwidth or mathematical letters, invisible characters.
    engine = PolicyEngine.load(
        _dir(
            tmp_path,
            '@id("no-wires")\nforbid (principal, action, resource)\nwhen { context.element_name_lower like "*wire transfer*" };\n',
        )
    )

    def forbidden(name: str) -> bool:
        request = CheckInput("a", "t", 1, "submit", url="https://bank.test/", element_role="button", element_name=name)
        return engine.evaluate(request, "https://bank.test").forbidden

    for name in (
        "Wire transfer",
        "Wire tr\u0430nsfer",
        "\uff37\uff49\uff52\uff45 transfer",
        "\U0001d416ire transfer",
        "Wi\u2060re trans\u200dfer",
    ):
        assert forbidden(name), name
    assert not forbidden("Wire details")
