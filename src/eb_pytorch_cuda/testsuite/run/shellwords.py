"""Split an easyconfig's shell-like string (runtest, pretestopts, testopts) into words, in linear time.

The words are exactly those of shlex.split (POSIX mode, no comments): blanks (space, tab, CR, LF) separate
words; a backslash outside quotes takes the next character literally; '...' is literal; inside "..." a
backslash escapes only `"` and `\\`, elsewhere it stays; '' and "" make an empty word; an unclosed quote or a
trailing backslash is a ValueError with shlex's own message.  shlex builds each word a character at a time
(`token = token + char` on an attribute, which CPython cannot extend in place), so one long word costs time
quadratic in its length: a 1 MB pretestopts word took 20.8 s (3 MB: over 120 s).  Here a regular expression
finds whole runs of characters and each word is joined once.
"""

import re
from typing import List

_PIECE = re.compile(r"""
    (?P<blank>[ \t\r\n]+)
  | '(?P<single>[^']*)'
  | "(?P<double>[^"\\]*(?:\\.[^"\\]*)*)"
  | \\(?P<escaped>.)
  | (?P<plain>[^ \t\r\n'"\\]+)
  | (?P<open>['"])
  | (?P<trailing>\\)
""", re.VERBOSE | re.DOTALL)
_DOUBLE_ESCAPE = re.compile(r'\\(["\\])')
_ENDS_ON_LONE_BACKSLASH = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*\\\Z', re.DOTALL)  # an open "..." ending so


def split_words(text: str) -> List[str]:
    """shlex.split(text) (POSIX, no comments), without its quadratic cost on long words."""
    words: List[str] = []
    pieces: List[str] = []
    in_word = False
    for match in _PIECE.finditer(text):
        kind = str(match.lastgroup)
        if kind == 'blank':
            if in_word:
                words.append(''.join(pieces))
                pieces, in_word = [], False
            continue
        if kind == 'open':  # no closing quote: the text ends inside it, maybe on a lone backslash (as shlex says)
            if match.group(kind) == '"' and _ENDS_ON_LONE_BACKSLASH.match(text, match.end()):
                raise ValueError('No escaped character')
            raise ValueError('No closing quotation')
        if kind == 'trailing':
            raise ValueError('No escaped character')
        value = match.group(kind)
        pieces.append(_DOUBLE_ESCAPE.sub(r'\1', value) if kind == 'double' and '\\' in value else value)
        in_word = True
    if in_word:
        words.append(''.join(pieces))
    return words
