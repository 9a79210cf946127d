"""The easyconfig's test command strings split as shlex.split splits them, in linear time, and a word too long
for execve() refused naming its parameter (run/shellwords.py, run/command.py)."""

import random
import shlex
import time

import pytest

from eb_pytorch_cuda.errors import PluginError
from eb_pytorch_cuda.testsuite.run.command import MAX_ARG_STRLEN, with_test_options
from eb_pytorch_cuda.testsuite.run.shellwords import split_words


def _split(function, text):
    try:
        return 'words', function(text)
    except ValueError as err:
        return 'error', str(err)


def test_the_words_and_errors_are_shlex_splits_on_every_short_string():
    """200,000 random strings of the characters that matter (blanks, both quotes, backslash, '=', '#', NUL,
    a non-ASCII letter): the same words, or the same ValueError message, as shlex.split."""
    rng = random.Random(50)
    alphabet = ' \t\r\n\'"\\ab=#\0é'
    for _ in range(200_000):
        text = ''.join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert _split(split_words, text) == _split(shlex.split, text), repr(text)


def test_a_long_word_splits_in_linear_time():
    """shlex took 3.1 s on one 512 KiB word (0.23 s on 128 KiB: quadratic, so about 110 s on 3 MB); this splits
    each 3 MB word in about 0.1 s, whatever its quoting (the bound leaves room for a loaded machine)."""
    for text in ('A=' + 'x' * 3_000_000 + ' ', '"' + 'a\\"' * 1_000_000 + '"', "'" + 'y' * 3_000_000 + "'",
                 '\\z' * 1_000_000):
        started = time.monotonic()
        words = split_words(text)
        assert len(words) == 1 and len(words[0]) >= 1_000_000
        assert time.monotonic() - started < 20


def test_a_word_of_the_kernels_largest_string_passes_one_byte_more_is_refused():
    """execve() takes a string of 131,071 bytes (its NUL makes MAX_ARG_STRLEN) and refuses one of 131,072."""
    largest = 'A=' + 'x' * (MAX_ARG_STRLEN - 3)
    assert with_test_options('run', largest, '', 'ec.eb') == ('run', {'A': 'x' * (MAX_ARG_STRLEN - 3)})
    for parameter, arguments in (('pretestopts', ('run', largest + 'x', '')), ('testopts', ('run', '', largest + 'x')),
                                 ('runtest', (largest + 'x', '', ''))):
        with pytest.raises(PluginError) as raised:
            with_test_options(*arguments, source='ec.eb')
        assert str(raised.value).startswith(f'ec.eb: {parameter} has a word of 131072 bytes'), str(raised.value)
