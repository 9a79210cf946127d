"""Text from a file, made safe for where it is printed: a terminal, a Python comment, Markdown.

Suite names, test ids, signals, notes and scope targets come from logs, XML reports and results JSON that
anyone may hand us (one bot job's file).  Printed as they are, a newline in a test id starts a new line
of a `--suggest-policy` suggestion (pasted into an easyconfig, that line is run as Python), an escape
sequence rewrites the terminal, a backtick or '|' breaks out of a Markdown code span or table cell.
So every such value goes through one of these on its way out; what we write as JSON stays exact.
"""

import re


def _escaped(char: str) -> str:
    """One non-printable character as Python writes it in a literal: \\n, \\x1b, \\u202e, ..."""
    return repr(char)[1:-1]


def printable(text: object) -> str:
    """text with every character str.isprintable() rejects (control characters, line and paragraph
    separators, bidirectional overrides, ...) written as its Python escape, so that it is one line of
    inert text on a terminal and in a Python comment (no line break of any kind, no terminal control)."""
    text = str(text)
    if text.isprintable():
        return text
    return ''.join(char if char.isprintable() else _escaped(char) for char in text)


def printable_lines(lines) -> str:
    """The lines (each built from pieces of text) joined by newlines, each made printable: a newline
    inside a piece is escaped, the newlines between lines are kept."""
    return '\n'.join(printable(line) for line in lines)


# what gives inline text a meaning in GitHub Markdown (emphasis, code, links and images, HTML and entities,
# table cells, strikethrough); what only means something at the start of a line (#, -, 1.) never is there:
# a piece of text always follows our own '- ' or '| '
_MARKDOWN_SPECIAL = '\\`*_[]<>&|~'


def markdown_text(text: object) -> str:
    """text as literal inline Markdown: every character that gives inline text a meaning backslash-escaped,
    non-printable ones as Python escapes."""
    return ''.join('\\' + char if char in _MARKDOWN_SPECIAL else char for char in printable(text))


def markdown_code(text: object, in_table: bool = False) -> str:
    """text as one Markdown code span: delimited by more backticks than it holds in a row, non-printable
    characters as Python escapes; in_table: '|' escaped too (GitHub ends a table cell at a '|' even inside a
    code span, and shows the escaped one as '|' there)."""
    text = printable(text)
    if in_table:
        text = text.replace('|', '\\|')
    longest = run = 0
    for char in text:
        run = run + 1 if char == '`' else 0
        longest = max(longest, run)
    fence = '`' * (longest + 1)
    pad = ' ' if text.startswith('`') or text.endswith('`') or not text.strip(' ') else ''
    return f'{fence}{pad}{text}{pad}{fence}'


def markdown_for_terminal(text: str) -> str:
    """Markdown we wrote (markdown_text, markdown_code) as a terminal shows it: the backslash escapes that keep
    a value literal for a Markdown renderer taken out again (`cuda\\_device\\_tests` reads cuda_device_tests), the
    code spans' content as it is (only a table's escaped '|' restored).  The text stays printable: what
    printable() escaped is not touched."""
    out, position = [], 0
    for span in _CODE_SPAN.finditer(text):
        out.append(_MARKDOWN_ESCAPE.sub(r'\1', text[position:span.start()]))
        out.append(span.group(0).replace('\\|', '|'))
        position = span.end()
    out.append(_MARKDOWN_ESCAPE.sub(r'\1', text[position:]))
    return ''.join(out)


# a backslash escape markdown_text writes; a code span as markdown_code writes it (a fence of n backticks, the
# content holding no run of n, the same fence: CommonMark's rule)
_MARKDOWN_ESCAPE = re.compile('\\\\([' + re.escape(_MARKDOWN_SPECIAL) + '])')
_CODE_SPAN = re.compile(r'(?<!`)(`+)(?!`)(.*?)(?<!`)\1(?!`)', re.S)
