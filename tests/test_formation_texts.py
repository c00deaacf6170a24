"""The texts formation embeds: the cross-lingual vector's is a memory's own text, cut where the main model stops."""

from __future__ import annotations

from app.formation.memcell import XL_TEXT_CHARS, embedding_text, xl_text


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
