"""The one tokeniser BM25 uses, at write time and at query time.

English (and other Latin-script) words are lower-cased, stop words dropped and Snowball-stemmed;
runs of Chinese characters are segmented by jieba in search mode, which also emits the parts of
compound words, so that 北京 finds 北京烤鸭 (``to_tsvector('simple')`` alone would keep a whole CJK run
as one token and BM25 would find nothing). The tokens are stored joined by spaces in
``memories.search_tokens``; PostgreSQL builds the tsvector from that with the 'simple' configuration,
which keeps each of our tokens as it is.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata

import jieba
import snowballstemmer

from app.text.stopwords import CHINESE_STOPWORDS, ENGLISH_STOPWORDS

jieba.setLogLevel(logging.WARNING)

# CJK Unified Ideographs (+ extension A) and the compatibility block: the runs jieba segments.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUNS = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_IS_CJK = re.compile(rf"[{_CJK}]")
_STEMMERS = threading.local()
"""A Snowball stemmer keeps state while it stems a word: each thread (the event loop's, the text workers')
has its own."""


@functools.lru_cache(maxsize=100_000)
def _stem(word: str) -> str:
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = snowballstemmer.stemmer("english")
    return stemmer.stemWord(word)


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` in order, repeats kept (term frequency matters to BM25)."""
    tokens: list[str] = []
    for run in _RUNS.findall(unicodedata.normalize("NFKC", text).lower()):
        if _IS_CJK.match(run):
            tokens.extend(word for word in jieba.lcut_for_search(run) if word.strip() and word not in CHINESE_STOPWORDS)
        elif run not in ENGLISH_STOPWORDS:
            tokens.append(_stem(run) if run.isascii() and run.isalpha() else run)
    return tokens


def word_count(text: str) -> int:
    """About how many words ``text`` has, in any script: a run of Latin letters or digits is one, a run of
    Chinese characters one per two characters (rounded up; Chinese words average about that)."""
    return sum((len(run) + 1) // 2 if _IS_CJK.match(run) else 1 for run in _RUNS.findall(text))


def search_tokens(text: str) -> str:
    """What is stored in ``memories.search_tokens``."""
    return " ".join(tokenize(text))


def search_tokens_of(texts: list[str]) -> list[str]:
    """``search_tokens`` of each text: one call for a batch, to run off the event loop (``run_off_loop``)."""
    return [search_tokens(text) for text in texts]


def warm_up() -> None:
    """Load jieba's dictionary now (about a second) rather than in the first request."""
    jieba.initialize()
