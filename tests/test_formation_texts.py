"""The texts formation embeds: the cross-lingual vector's is a memory's own text, cut where the main model stops;
the turns beside a message are cut to their nearest part."""

from __future__ import annotations

from app.text.memory_text import (
    NEIGHBOUR_CHARS,
    XL_TEXT_CHARS,
    embedding_text,
    entry_text,
    nearest_end,
    nearest_start,
    xl_text,
)


def test_a_short_memory_is_embedded_whole_across_languages() -> None:
    assert xl_text("Title", "Alice: we met on Friday") == embedding_text("Title", "Alice: we met on Friday", [])


def test_a_long_memory_is_cut_at_a_word_before_the_limit() -> None:
    episode = " ".join(f"word{i}" for i in range(1000))
    cut = xl_text(None, episode)
    assert len(cut) <= XL_TEXT_CHARS and episode.startswith(cut) and episode[len(cut)] == " "
    assert len(cut) > XL_TEXT_CHARS - 10


def test_a_text_without_spaces_is_cut_at_the_limit() -> None:
    chinese = "我们周五在公园见面" * 300
    assert xl_text(None, chinese) == chinese[:XL_TEXT_CHARS]


def test_a_long_neighbouring_turn_without_spaces_still_gives_its_nearest_part() -> None:
    """A long Chinese turn beside a message gives its nearest ``NEIGHBOUR_CHARS`` characters to the message's
    vector and BM25 text (it gave nothing: the cut looked for a space); an English one is cut at a word."""
    chinese = "我们周五在公园见面" * 100
    assert nearest_end([chinese]) == [chinese[-NEIGHBOUR_CHARS:]]
    assert nearest_start([chinese]) == [chinese[:NEIGHBOUR_CHARS]]
    assert entry_text("李四：好的", chinese) == f"李四：好的\n{chinese[-NEIGHBOUR_CHARS:]}\n李四：好的"
    english = " ".join(f"word{i}" for i in range(200))
    (end,), (start,) = nearest_end([english]), nearest_start([english])
    assert english.endswith(" " + end) and len(end) < NEIGHBOUR_CHARS
    assert english.startswith(start + " ") and len(start) < NEIGHBOUR_CHARS
