"""Text as a reader sees it: what the sidecar matches names and titles in.

A hostile page can give a control a name that reads "Delete account" to the agent and to
anyone looking, and is another string to a pattern: a zero-width space or a soft hyphen
inside the word ("Dele\\u200bte"), a Cyrillic or Greek letter that looks Latin ("D\\u0435lete",
with a Cyrillic e), fullwidth or mathematical letters, or letters spaced apart
("D e l e t e"). :func:`fold` undoes each of them, so that the risk classifier
(:mod:`._risk`) and the policies' ``context.element_name_lower`` see what a reader sees:

1. in the order it is shown: what a right-to-left override (U+202E, up to its pop,
   U+202C) encloses is shown reversed ("\\u202etnuocca eteleD" shows "Delete account");
   then NFKC (fullwidth, ligatures, mathematical letters, compatibility forms);
2. without the characters that render as nothing: the format characters (Unicode
   category Cf: zero-width spaces and joiners, soft hyphens, bidirectional controls, tags)
   and the rest of the default-ignorable code points (variation selectors, the combining
   grapheme joiner, Hangul fillers);
3. common look-alikes of Latin letters from Cyrillic, Greek, Armenian, Cherokee and IPA
   letters read as the Latin letter (a word written to look English is read as English;
   real Russian or Greek text is not matched by anything that this changes);
4. lowercase (:func:`fold`) or case-folded (:func:`fold_words`, for matching words).

:func:`fold_words` also joins letters spaced apart ("D e l e t e", "D-E-L-E-T-E": three or
more single letters in a row) and collapses whitespace.

Pure and cheap: ASCII text only goes through ``lower``.
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["fold", "fold_words"]

# Default-ignorable code points that are not of category Cf (those are dropped by category).
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul choseong and jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian free variation selectors, vowel separator
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xE0100, 0xE01EF),  # variation selectors supplement
)

# Letters that look like a Latin letter (written escaped: they look like it here too), and
# the letter, pair by pair; in both cases where both look alike.
_LOOK_ALIKES = (
    # Cyrillic
    (
        "\u0410\u0412\u0415\u0405\u0406\u0407\u0408\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0423\u0425\u04ae\u04ba\u04c0\u0500\u051a\u051c\u042c\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0455\u0456\u0457\u0458\u04bb\u0501\u051b\u051d\u04cf\u04af\u050d\u0475",
        "ABESIIJKMHOPCTYXYHIDQWbaeopcyxsiijhdqwlygv",
    ),
    # Greek
    (
        "\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7\u03f9\u037f\u03b1\u03b9\u03ba\u03bd\u03bf\u03c1\u03c5\u03c7\u03b3\u03f2\u03f3",
        "ABEZHIKMNOPTYXCJaikvopuxycj",
    ),
    # Armenian
    (
        "\u054d\u0555\u054f\u057d\u0585\u0581\u0570\u0578\u0561\u0566",
        "UOSuoghnwq",
    ),
    # Cherokee
    (
        "\u13a0\u13a1\u13a2\u13a5\u13aa\u13ab\u13ac\u13f4\u13b3\u13b7\u13bb\u13c0\u13c3\u13c6\u13d2\u13d4\u13da\u13de\u13df\u13e2\u13e6\u13d9\u13eb",
        "DRTiAJEBWMHGZlRWSLCPKVo",
    ),
    # other Latin letters (IPA, small capitals, dotless)
    (
        "\u0261\u0131\u0237\u0251\u0269\u028b\u028f\u026a\u0280\u1d05\u1d07\u029f\u1d0d\u0274\u1d0f\u1d1b\u1d20",
        "gijaiuyirdelmnotv",
    ),
)


#: Where the format characters (category Cf) are: the BMP, plane 1 and the tags' plane 14
#: (a test checks that no other code point is one).
CF_PLANES = (range(0x20000), range(0xE0000, 0xE1000))


@functools.cache
def _table() -> dict[int, str | None]:
    """The translation table, made on the first text that is not ASCII (about 20 ms)."""
    table: dict[int, str | None] = {ord(k): v for keys, latin in _LOOK_ALIKES for k, v in zip(keys, latin, strict=True)}
    for low, high in _IGNORABLE_RANGES:
        table.update(dict.fromkeys(range(low, high + 1)))
    for plane in CF_PLANES:
        table.update((code, None) for code in plane if unicodedata.category(chr(code)) == "Cf")
    return table


# Three or more single letters, each followed by spaces or one of . - _ · • * / | and a
# single letter: "d e l e t e", "d-e-l-e-t-e".
_SPACED = re.compile(r"(?<![^\W\d_])[^\W\d_](?:(?:\s+|\s*[.\-_·•*/|]\s*)[^\W\d_](?![^\W\d_])){2,}")
_SEPARATORS = re.compile(r"[\s.\-_·•*/|]+")


# A right-to-left override and what it encloses, up to its pop or the end.
_OVERRIDE = re.compile("\u202e([^\u202a-\u202e]*)(?:\u202c|$)")


def _plain(text: str) -> str:
    if "\u202e" in text:
        text = _OVERRIDE.sub(lambda m: m.group(1)[::-1], text)
    return unicodedata.normalize("NFKC", text).translate(_table())


def fold(text: str) -> str:
    """``text`` as read, lowercased: NFKC, no invisible characters, look-alikes as the
    Latin letter. ``context.element_name_lower`` is this of the element's name."""
    if text.isascii():
        return text.lower()
    return _plain(text).lower()


def fold_words(text: str) -> str:
    """``text`` as read, case-folded, letters spaced apart joined, whitespace collapsed:
    what the risk classifier matches words in."""
    folded = text if text.isascii() else _plain(text)
    folded = _SPACED.sub(lambda m: _SEPARATORS.sub("", m.group()), folded.casefold())
    return " ".join(folded.split())
