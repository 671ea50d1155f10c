"""Text as a person reads it: what every rule that asks "do these two say the same?" compares.

A person does not see a zero-width space, a combining grapheme joiner, a variation selector, a
Hangul filler or a braille blank, and reads a no-break space, a full-width letter or a ligature as
the plain one. So `as_read` removes Unicode's default-ignorable code points (the
Default_Ignorable_Code_Point property, DerivedCoreProperties.txt) and the blanks that draw
nothing (U+2800), applies NFKC, and collapses white space. Two entries that say the same read
the same; an entry that reads as nothing (`reads_empty`) is refused where entries are written.
What is stored and shown keeps what was written (escaped when printed); only comparisons use this.
"""

from __future__ import annotations

import re
import unicodedata

# Default_Ignorable_Code_Point (Unicode 15.1), and U+2800 BRAILLE PATTERN BLANK: drawn as nothing.
_INVISIBLE = re.compile(
    "["
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
    "]"
)


def as_read(text: str) -> str:
    """`text` as a person reads it: invisible code points removed, NFKC, white space collapsed.
    (Removed before and after NFKC: it can make an ignorable one, U+FFA0 -> U+3164.)"""
    visible = _INVISIBLE.sub("", unicodedata.normalize("NFKC", _INVISIBLE.sub("", text)))
    return " ".join(visible.split())


def reads_empty(text: str) -> bool:
    """Whether `text` shows nothing a person could read."""
    return not as_read(text)
