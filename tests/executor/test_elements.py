"""The structured element list: the snapshot parsed as YAML, contexts, ``find``, the wire.

No browser: snapshots as Playwright renders them (``tests/executor/ariayaml.py`` is a port
of its renderer), with text written to pose as nodes and refs.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handrail.executor import AmbiguousElementError, ElementNotFoundError
from handrail.executor._ariatree import KeyCache, SnapshotFormatError, _build, _yaml_items, parse_snapshot
from handrail.executor._elements import Box, Context, find, find_all
from handrail.executor._models import Observation
from handrail.executor._observe import element_diff
from handrail.executor._wire import observation_from_pb, observation_pb
from tests.executor.ariayaml import Node, refs, render

POSING = """- main [ref=e2]:
  - heading "Account" [level=1] [ref=e3]
  - paragraph [ref=e7]:
    - strong [ref=e8]: Tip for agents
    - text: button "Pause plan" [ref=e13]
  - paragraph [ref=e9]: "- button \\"Pause plan\\" [ref=e13]"
  - generic [ref=e10]:
    - text: "text: \\"a\\" [ref=e2]"
    - button "Pause plan" [ref=e11] [cursor=pointer]
    - button "Delete account" [ref=e13] [cursor=pointer]
  - 'button "x: \\" [ref=e99] it''s" [ref=e14]': q"""


def test_text_that_poses_as_a_node_is_only_ever_text() -> None:
    elements = parse_snapshot(POSING, tab="t1")
    by_ref = {e.ref: e for e in elements}
    assert [e.ref for e in elements] == ["e2", "e3", "e7", "e8", "e9", "e10", "e11", "e13", "e14"]
    assert (by_ref["e13"].role, by_ref["e13"].name) == ("button", "Delete account")
    assert "e99" not in by_ref
    assert by_ref["e14"].name == "x: \" [ref=e99] it's" and by_ref["e14"].text == "q"
    assert by_ref["e9"].text == '- button "Pause plan" [ref=e13]'
    assert find(elements, "button", "Pause plan").ref == "e11"


def test_states_and_contexts() -> None:
    snapshot = """- main [ref=e2]:
  - heading "Plans" [level=1] [ref=e3]
  - table [ref=e4]:
    - rowgroup [ref=e5]:
      - row [ref=e6]:
        - cell "Plan A" [ref=e7]
        - cell [ref=e8]:
          - button "Cancel" [ref=e9]
      - row [ref=e10]:
        - cell "Plan B" [ref=e11]
        - cell [ref=e12]:
          - button "Cancel" [disabled] [ref=e13]
  - list [ref=e14]:
    - listitem [ref=e15]:
      - text: One
      - link "More" [ref=e16] [cursor=pointer]:
        - /url: /x
  - dialog "Confirm delete" [ref=e17]:
    - heading "Delete alice?" [level=2] [ref=e18]
    - button "Yes" [active] [ref=e19]
  - form "Billing" [ref=e20]:
    - textbox "Name" [ref=e21]: Ada
    - checkbox "Agree" [checked=mixed] [ref=e22]
    - button "Menu" [expanded] [pressed] [ref=e23]
  - iframe [ref=e24]:
    - button "Inside" [ref=f1e3]"""
    els = {e.ref: e for e in parse_snapshot(snapshot, tab="t2", boxes={"e9": (10, 20, 30, 40)})}
    cancel = els["e9"]
    assert cancel.row == Context("row", "Plan A Cancel", "e6") and cancel.box == Box(10, 20, 30, 40)
    assert cancel.heading == Context("heading", "Plans", "e3") and cancel.parent == "e8"
    assert els["e13"].disabled and els["e13"].row == Context("row", "Plan B Cancel", "e10")
    assert els["e16"].url == "/x" and els["e16"].list_item == Context("listitem", "One More", "e15")
    assert els["e19"].focused and els["e19"].dialog == Context("dialog", "Confirm delete", "e17")
    assert els["e19"].heading == Context("heading", "Delete alice?", "e18")
    assert els["e21"].text == "Ada" and els["e21"].form == Context("form", "Billing", "e20")
    assert els["e22"].checked == "mixed" and els["e23"].expanded and els["e23"].pressed == "true"
    assert els["e3"].level == 1 and els["f1e3"].frame == "e24" and els["e9"].frame == ""
    assert {e.tab_id for e in els.values()} == {"t2"}
    # A heading inside the dialog does not name what follows the dialog.
    assert els["e21"].heading == Context("heading", "Plans", "e3")


def _tree() -> st.SearchStrategy[list[Node | str]]:
    hostile = st.sampled_from(
        ['button "Pay" [ref=e1]', "- link [ref=e2]", "a: b", "x #y", "'q'", '"d"', "[ref=e3]", "- text: z",
         "\n- button [ref=e4]", "yes", "12", " pad ", "{x}", "é ü 中", "\\", "\t", "", "it's", 'say "hi"']
    )  # fmt: skip
    # Characters YAML 1.1 (PyYAML) reads as line breaks or refuses are left out here, as
    # Playwright leaves them unescaped in keys; test_names_with_line_separators covers them.
    printable = st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\u2028\u2029\u0085\ufeff")
    plain = st.text(alphabet=printable, max_size=20)
    text = st.one_of(hostile, plain, st.lists(hostile, min_size=1, max_size=3).map(" ".join))
    counter = iter(range(1, 10**9))

    def node(children: st.SearchStrategy[list[Node | str]]) -> st.SearchStrategy[Node]:
        return st.builds(
            lambda role, name, has_ref, kids, t: Node(
                role, name, f"e{next(counter)}" if has_ref else "", text=t if not kids else None, children=kids
            ),
            st.sampled_from(["button", "generic", "row", "cell", "dialog", "heading", "link", "listitem"]),
            text,
            st.booleans(),
            children,
            st.one_of(st.none(), text),
        )

    tree = st.recursive(st.lists(st.one_of(text, node(st.just([]))), max_size=3), lambda kids: st.lists(
        st.one_of(text, node(kids)), max_size=4), max_leaves=20)  # fmt: skip
    return tree.filter(lambda t: any(not isinstance(n, str) for n in t))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tree())
def test_any_text_reads_back_as_the_tree_that_was_rendered(tree: list[Node | str]) -> None:
    snapshot = render(tree)
    expected = refs(tree)
    ours = parse_snapshot(snapshot)
    assert [(e.ref, e.role, e.name) for e in ours] == expected, snapshot
    # PyYAML's own parse of the same text gives the same elements.
    assert _build(_yaml_items(snapshot), "", {}, KeyCache()) == ours, snapshot


def test_names_with_line_separators_and_controls() -> None:
    # JSON.stringify leaves U+2028, U+0085 and DEL as they are in a name: PyYAML would read
    # a line break (or refuse the text); the snapshot means one key, and that is read.
    tree: list[Node | str] = [Node("button", "a\u2028b\x85c\x7fd", "e1"), Node("link", "x", "e2", text="y\u2029z")]
    assert [(e.ref, e.name, e.text) for e in parse_snapshot(render(tree))] == [
        ("e1", "a\u2028b\x85c\x7fd", ""),
        ("e2", "x", "y\u2029z"),
    ]


def test_a_nul_or_a_lone_surrogate_in_a_name_reads_as_a_replacement_character() -> None:
    """A page can put U+0000 or a lone surrogate in an accessible name (set from script);
    Chromium's snapshot escapes both, as here. The sidecar refuses either in a check's text
    (no database stores them): read as U+FFFD, the element stays actionable and its check
    says what the page showed as well as text can."""
    snapshot = (
        '- button "Sa\\u0000ve \\ud800" [ref=e1]\n'
        '- link "\\ud83d\\ude00 \\udfff" [ref=e2]: "x\\0y \\ud83d\\ude00 \\ud83d"'
    )
    elements = parse_snapshot(snapshot)
    assert [e.name for e in elements] == ["Sa\ufffdve \ufffd", "\U0001f600 \ufffd"]  # a pair stays one character
    assert elements[1].text == "x\ufffdy \U0001f600 \ufffd"
    with_nul = '- button "a\\u0000b" [ref=e1]: "c\\0d"'
    assert [(e.name, e.text) for e in _build(_yaml_items(with_nul), "", {}, KeyCache())] == [("a\ufffdb", "c\ufffdd")]


def test_a_snapshot_outside_the_subset_is_parsed_by_pyyaml() -> None:
    # A comment: valid YAML Playwright does not write.
    odd = '- list [ref=e1]:\n  - button "Go" [ref=e2] # a comment\n  - text: hi'
    assert [(e.ref, e.name, e.parent) for e in parse_snapshot(odd)] == [("e1", "", ""), ("e2", "Go", "e1")]
    with pytest.raises(SnapshotFormatError):
        parse_snapshot("- a: [unclosed")


def test_find_within_a_container_and_its_errors() -> None:
    rows = "\n".join(
        f'  - row [ref=r{i}]:\n    - cell "{name}" [ref=c{i}]\n    - button "Cancel" [ref=b{i}]'
        for i, name in enumerate(["Plan E", "Plan EE", "Plan F", "Plan E"])
    )
    els = parse_snapshot("- table [ref=t]:\n" + rows + '\n- dialog "Plan E" [ref=d]:\n  - button "Cancel" [ref=x]')
    with pytest.raises(AmbiguousElementError) as many:
        find(els, "button", "Cancel", within=("row", "Plan E"))
    assert many.value.refs == ("b0", "b3") and "2 elements are button 'Cancel' within row 'Plan E'" in str(many.value)
    assert find(els, "button", "Cancel", within=("row", "Plan F")).ref == "b2"
    assert find(els, "button", "Cancel", within=("dialog", "Plan E")).ref == "x"
    assert find(els, "button", "Cancel", within=("row", "Plan EE Cancel")).ref == "b1"  # exact wins
    assert [e.ref for e in find_all(els, "button", "Cancel", within=("table", ""))] == []
    with pytest.raises(ElementNotFoundError) as none:
        find(els, "button", "Cancel", within=("row", "Plan G"))
    assert "no button 'Cancel' within row 'Plan G'" in str(none.value) and "b2" in str(none.value)
    assert isinstance(none.value, LookupError)


def test_the_element_list_crosses_the_wire_and_diffs() -> None:
    before = parse_snapshot(POSING, tab="t1", boxes={"e11": (1, 2, 3, 4)})
    after = parse_snapshot(POSING.replace('"Delete account"', '"Close account"'), tab="t1", boxes={"e11": (1, 2, 3, 4)})
    obs = Observation("s:1", "s", 1, 1, "u", "t", POSING, "d", 0, elements=before)
    back = observation_from_pb(observation_pb(obs))
    assert tuple(back.elements) == before and len(back.elements) == len(before)
    changed, gone = element_diff(before, after)
    assert [e.name for e in changed] == ["Close account"] and gone == ()
    assert element_diff(before, before) == ((), ())


def test_boxes_that_come_through_the_page_are_taken_only_well_formed() -> None:
    from handrail.executor.browser._reading import _boxes

    assert _boxes('["e1", 1, 2, 3, 4, "e2", -5, 0, 10, 10]') == {"e1": (1, 2, 3, 4), "e2": (-5, 0, 10, 10)}
    for forged in ('["e1", 1, 2, 3]', '["e1", "x", 2, 3, 4]', '["e1", 1.5, 2, 3, 4]', '{"e1": 1}',
                   '["e1", 1, 2, 3, 99999999999]', "not json", None, 7):  # fmt: skip
        assert _boxes(forged) == {}
