"""The offline fact reader: what a speaker states about themselves, and what it must leave alone."""

from __future__ import annotations

import pytest

from app.formation.facts import facts_of

STATED = [
    ("I changed careers and became a teacher.", "job", "teacher"),
    ("I got hired as an accountant.", "job", "accountant"),
    ("I work at the hospital as a nurse.", "job", "nurse"),
    ("I'm a student at Rice University.", "school", "rice university"),
    ("I'm studying at Boston College now.", "school", "boston college"),
    ("Quick update: we relocated to Oslo in May.", "residence", "oslo"),
    ("We finally settled in Denver.", "residence", "denver"),
    ("After Rex died I got a cat named Luna.", "pet", "cat:luna"),
    ("Anna and I are dating.", "partner", "anna"),
    ("I traded in my old car and now I drive a Kia Soul.", "car", "kia soul"),
    ("I'm a vegan these days.", "diet", "vegan"),
    ("我最近又开始吃素了。", "diet", "vegetarian"),
    ("我现在吃肉。", "diet", "omnivore"),
    ("我转行当了医生。", "job", "医生"),
    ("我在医院当护士。", "job", "护士"),
    ("我找到了一份程序员的工作。", "job", "程序员"),
    ("我们搬到了杭州。", "residence", "杭州"),
    ("我在杭州定居了。", "residence", "杭州"),
    ("现在我女朋友是刘芳。", "partner", "刘芳"),
    ("我考上了复旦大学。", "school", "复旦大学"),
    ("Rex died, so I got another dog named Max.", "pet", "dog:max"),
    ("After losing Rex, we brought home a new dog; her name is Luna.", "pet", "dog:luna"),
    ("Luna is my cat, and she runs the house.", "pet", "cat:luna"),
    ("I'm seeing someone new now, Sam.", "partner", "sam"),
    ("I go to McGill University and I'm in my second year.", "school", "mcgill university"),
    ("我转行了，现在在做护士。", "job", "护士"),
    ("我平时都吃素。", "diet", "vegetarian"),
    ("我和王强上周正式在一起了。", "partner", "王强"),
    ("王强是我男朋友。", "partner", "王强"),
    ("我家狗旺财现在正趴在我旁边。", "pet", "狗:旺财"),
    ("我家狗今天生病了。", "pet", "狗:"),
    ("我住北京嘛，你帮我推荐几个地方。", "residence", "北京"),
    ("豆豆不在了，我最近新养了一只狗，给它起名叫旺财。", "pet", "狗:旺财"),
]

NOT_STATED = [
    "My sister moved to Berlin last week.",
    "I visited friends who moved to Paris.",
    "I moved to Boston College.",
    "If I moved to Berlin I would learn German.",
    "I used to live in Paris.",
    "我姐姐上周搬到了北京。",
    "我想搬到柏林。",
    "我是会员。",
    "我是他的老师。",
]


@pytest.mark.parametrize(("text", "attribute", "value"), STATED)
def test_a_first_person_statement_is_a_fact(text: str, attribute: str, value: str):
    assert [(fact.attribute, fact.value) for fact in facts_of("u", text)] == [(attribute, value)]


@pytest.mark.parametrize("text", NOT_STATED)
def test_someone_elses_fact_a_wish_or_the_past_is_none(text: str):
    assert facts_of("u", text) == []


def test_an_addition_replaces_nothing():
    assert [fact.adds for fact in facts_of("u", "I also adopted a dog called Max.")] == [True]
    assert [fact.adds for fact in facts_of("u", "我还养了一只狗，叫小白。")] == [True]
