"""Knowledge updates: does memsys answer with what is true now when a user's facts change?

A generated set of users (English and Chinese), each telling an assistant a few facts about themselves in one
session and, months later, in a second session, newer values of some of them (a move, a new job, a new pet, a
diet, a partner, a car, a school), driven through the HTTP API of a fresh ``memsys serve`` with its defaults
(offline). A third of the users also say, in the second session, something that must change nothing: someone
else's change ("my sister moved to …"), the same value again, or an addition ("I also adopted …").

Every statement is drawn from one of two sets of wordings: ``tuned`` (the wordings the offline fact patterns were
written against) and ``held_out`` (written by someone who had not seen the patterns, and measured before any pattern
was changed after seeing it); both are reported. When the patterns are changed after a held-out set's misses, that
set joins ``tuned`` and a new held-out set is written (docs/memories.md, "How well").

Figures, per attribute, language, wording set and memory type searched:
* ``current_first``: of the memories found that state the old or the new value, the first states the new one;
* ``current@1``, ``current@5``: the new value is in the first memory found, in the first five;
* ``stale_hidden``: no memory among the 10 found states only the old value;
* ``wrongly_superseded``: of the control statements, those after which a memory stating the unchanged value was
  superseded (precision: should be 0);
* ``history_complete``: of the superseded memories, those whose history holds ``formed`` then ``superseded``.

    python -m benchmarks.knowledge_updates --users 240 --out benchmarks/results
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import httpx

from benchmarks.common import RESULTS_DIR, memsys_server, panel_plot, post_json, print_table, save

JANUARY = datetime.fromisoformat("2026-01-12T09:00:00+00:00")
JUNE = datetime.fromisoformat("2026-06-15T19:00:00+00:00")
MEMORY_TYPES = ("episode", "event_log", "semantic_memory")
METRICS = ("current_first", "current@1", "current@5", "stale_hidden")

EN_NAMES = ["Alice", "Bruno", "Chloe", "Daniel", "Emma", "Farid", "Grace", "Hugo", "Iris", "Jonas", "Kira", "Liam"]
ZH_NAMES = ["小李", "王芳", "张伟", "刘洋", "陈静", "杨帆", "赵磊", "黄敏", "周杰", "吴婷", "徐明", "孙丽"]

# Per language and attribute: the values, how a value is stated (first session), how a change is stated (second),
# each in two sets of wordings, and the question asked. {v} the value, {a} its article, {old} the old value,
# {s} a pet's species.
WORDINGS: dict[str, dict[str, dict]] = {
    "en": {
        "residence": {
            "values": [
                "Paris",
                "Berlin",
                "Madrid",
                "Lisbon",
                "Toronto",
                "Sydney",
                "Chicago",
                "Seattle",
                "Dublin",
                "Vienna",
                "Prague",
                "Oslo",
                "Denver",
                "Boston",
            ],
            "state": {
                "tuned": ["I live in {v} and I love it here.", "These days I live in {v}, near the old town."],
                "held_out": [
                    "I live in {v}.",
                    "Home for me is {v} these days, so keep that in mind for restaurant suggestions.",
                    "I'm based in {v}, so anything in the evening my time works best.",
                ],
            },
            "change": {
                "tuned": ["I moved to {v} last month!", "Quick update: we relocated to {v} in May."],
                "held_out": [
                    "We finally moved to {v} last month!",
                    "I just relocated to {v} for good, so I need to figure out the local transit.",
                    "After all the packing, we've settled in {v} now.",
                ],
            },
            "ask": "Where does {name} live?",
        },
        "job": {
            "values": [
                "nurse",
                "teacher",
                "software developer",
                "chef",
                "lawyer",
                "accountant",
                "architect",
                "photographer",
                "pharmacist",
                "electrician",
                "journalist",
                "designer",
            ],
            "state": {
                "tuned": ["I work as {a} {v}, long days but I like it.", "I'm {a} {v} at a small company."],
                "held_out": [
                    "I'm {a} {v}.",
                    "I work as {a} {v} at a mid-sized company, so my schedule is pretty fixed.",
                    "I'm {a} {v} by trade, and honestly I still enjoy it.",
                ],
            },
            "change": {
                "tuned": ["I now work as {a} {v}.", "I changed careers and became {a} {v}."],
                "held_out": [
                    "I just started as {a} {v} this week!",
                    "Good news: I landed a job as {a} {v}, starting Monday.",
                    "I switched careers and I'm now working as {a} {v}.",
                ],
            },
            "ask": "What is {name}'s job?",
        },
        "pet": {
            "values": [
                "Felix",
                "Rex",
                "Luna",
                "Milo",
                "Bella",
                "Oscar",
                "Coco",
                "Max",
                "Nala",
                "Simba",
                "Pepper",
                "Ziggy",
            ],
            "species": ["cat", "dog", "rabbit", "parrot"],
            "state": {
                "tuned": ["My {s} {v} keeps me company.", "I have a {s} called {v}."],
                "held_out": [
                    "I have a {s} named {v}.",
                    "My {s}, {v}, is curled up next to me right now.",
                    "{v} is my {s}, and he's the main reason I work from home.",
                ],
            },
            "change": {
                "tuned": [
                    "{old} passed away in April, so I adopted a {s} called {v}.",
                    "After {old} died I got a {s} named {v}.",
                ],
                "held_out": [
                    "{old} passed away in the spring, and last week I adopted a {s} called {v}.",
                    "After losing {old}, we brought home a new {s}; her name is {v}.",
                    "I finally got another {s} after {old} died, and I named him {v}.",
                ],
            },
            "ask": "What pet does {name} have?",
        },
        "diet": {
            "values": ["vegetarian", "vegan", "pescatarian"],
            "state": {
                "tuned": ["I'm {v}, so no meat for me.", "I am {a} {v} these days."],
                "held_out": [
                    "I'm {v}.",
                    "I've been {v} for years, so please skip the meat in any recipe ideas.",
                    "Just so you know, my diet is {v}, so keep that in mind for meal plans.",
                ],
            },
            "change": {
                "tuned": ["I went {v} last month.", "I've become {v} since spring."],
                "held_out": [
                    "I've gone {v} as of this month.",
                    "I recently switched to a {v} diet and I'm still learning what to cook.",
                    "Starting this year I'm {v}, so I need new lunch ideas.",
                ],
            },
            "ask": "What diet does {name} follow?",
        },
        "partner": {
            "values": ["Tom", "Anna", "Marco", "Julia", "Sam", "Nora", "Leo", "Maya", "Omar", "Ella"],
            "state": {
                "tuned": ["My boyfriend {v} cooked dinner tonight.", "My partner {v} says hi."],
                "held_out": [
                    "My partner's name is {v}.",
                    "I live with my girlfriend, {v}, and we split the cooking.",
                    "{v} and I have been together for a while now, and we're planning a trip.",
                ],
            },
            "change": {
                "tuned": ["I broke up with {old}. I'm dating {v} now.", "My new girlfriend {v} is wonderful."],
                "held_out": [
                    "I'm seeing someone new now, {v}.",
                    "I just started dating {v}, and I want to plan something nice for our first weekend away.",
                    "Big update: {v} and I are officially together as of last week.",
                ],
            },
            "ask": "Who is {name}'s partner?",
        },
        "car": {
            "values": [
                "Toyota Corolla",
                "Honda Civic",
                "Tesla Model 3",
                "Ford Focus",
                "Volkswagen Golf",
                "BMW X3",
                "Kia Soul",
                "Subaru Outback",
                "Mazda CX-5",
                "Volvo XC40",
            ],
            "state": {
                "tuned": ["I drive a {v} to work.", "My car is a {v}, pretty reliable."],
                "held_out": [
                    "I drive a {v}.",
                    "My daily driver is the {v}, and it's been reliable so far.",
                    "I commute in my {v} every morning, about forty minutes each way.",
                ],
            },
            "change": {
                "tuned": ["I bought a new {v} yesterday!", "I traded in my old car and now I drive a {v}."],
                "held_out": [
                    "I just picked up a new {v}!",
                    "We traded in and bought a used {v} yesterday.",
                    "I finally got my {v} last week, so road trips are back on.",
                ],
            },
            "ask": "What car does {name} drive?",
        },
        "school": {
            "values": [
                "Stanford University",
                "Boston College",
                "McGill University",
                "Imperial College",
                "Trinity College",
                "Columbia University",
                "Rice University",
                "Tufts University",
            ],
            "state": {
                "tuned": ["I study at {v}.", "I'm a student at {v}."],
                "held_out": [
                    "I'm a student at {v}.",
                    "I study at {v}, so my exams are always in early December.",
                    "I go to {v} and I'm in my second year.",
                ],
            },
            "change": {
                "tuned": ["I transferred to {v} this semester.", "I'm studying at {v} now."],
                "held_out": [
                    "I just transferred to {v}.",
                    "I got into {v} and classes started this week!",
                    "This semester I've started at {v}, and the campus is huge.",
                ],
            },
            "ask": "Where does {name} study?",
        },
    },
    "zh": {
        "residence": {
            "values": ["北京", "上海", "广州", "深圳", "成都", "杭州", "南京", "武汉", "西安", "重庆", "苏州", "厦门"],
            "state": {
                "tuned": ["我住在{v}，很喜欢这里。", "我现在住在{v}的老城区。"],
                "held_out": [
                    "我住在{v}。",
                    "我现在人在{v}，推荐餐厅的时候按这边来就行。",
                    "我家在{v}，平时都在这边上班。",
                ],
            },
            "change": {
                "tuned": ["我上个月搬到了{v}。", "告诉你，我已经搬去{v}了。"],
                "held_out": [
                    "我们上个月已经搬到{v}了！",
                    "我刚搬去{v}，还在熟悉这边的地铁。",
                    "折腾了半天，我们总算在{v}安顿下来了。",
                ],
            },
            "ask": "{name}住在哪里？",
        },
        "job": {
            "values": ["护士", "老师", "程序员", "厨师", "律师", "会计", "建筑师", "摄影师", "医生", "设计师"],
            "state": {
                "tuned": ["我是一名{v}，每天都很忙。", "我的工作是{v}。"],
                "held_out": ["我是{v}。", "我在一家公司当{v}，作息比较固定。", "我现在的工作是{v}，干了好几年了。"],
            },
            "change": {
                "tuned": ["我现在是一名{v}。", "我转行当了{v}。"],
                "held_out": [
                    "我这周刚开始当{v}！",
                    "好消息，我找到了一份{v}的工作，下周一入职。",
                    "我转行了，现在在做{v}。",
                ],
            },
            "ask": "{name}的工作是什么？",
        },
        "pet": {
            "values": ["咪咪", "旺财", "豆豆", "球球", "花花", "小白", "大黄", "毛毛", "点点", "乐乐"],
            "species": ["猫", "狗", "兔子"],
            "state": {
                "tuned": ["我的{s}叫{v}。", "我家{s}叫{v}，特别可爱。"],
                "held_out": [
                    "我养了一只{s}，叫{v}。",
                    "我家{s}{v}现在正趴在我旁边睡觉。",
                    "{v}是我的{s}，每天下班回家它都在门口等我。",
                ],
            },
            "change": {
                "tuned": ["{old}去世了，我领养了一只{s}，叫{v}。", "{old}走了以后，我新养了一只{s}，名叫{v}。"],
                "held_out": [
                    "{old}春天走了，上周我又领养了一只{s}，叫{v}。",
                    "{old}去世以后，我们家新来了一只{s}，名字叫{v}。",
                    "{old}不在了，我最近新养了一只{s}，给它起名叫{v}。",
                ],
            },
            "ask": "{name}养了什么宠物？",
        },
        "diet": {
            "values": ["吃素", "吃肉"],
            "state": {
                "tuned": ["我{v}，不挑食。", "我现在{v}。"],
                "held_out": ["我{v}。", "我平时都{v}，给我推荐菜谱的时候注意一下。", "我一直{v}，已经好多年了。"],
            },
            "change": {
                "tuned": ["我开始{v}了。", "我最近又开始{v}了。"],
                "held_out": [
                    "我从这个月开始{v}了。",
                    "最近我改成{v}了，还在摸索怎么做饭。",
                    "今年起我决定{v}，你帮我想想午饭吃什么。",
                ],
            },
            "ask": "{name}的饮食习惯是什么？",
        },
        "partner": {
            "values": ["李雷", "韩梅", "王强", "刘芳", "陈晨", "赵雪", "孙浩", "周婷"],
            "state": {
                "tuned": ["我男朋友叫{v}。", "我老公叫{v}，他很会做饭。"],
                "held_out": [
                    "我对象叫{v}。",
                    "我和女朋友{v}住在一起，平时轮流做饭。",
                    "{v}是我男朋友，我们在一起挺久了。",
                ],
            },
            "change": {
                "tuned": ["我和{old}分手了。我的新男朋友叫{v}。", "现在我女朋友是{v}。"],
                "held_out": [
                    "我现在在和{v}交往。",
                    "我最近刚开始跟{v}约会，想安排个周末出去玩。",
                    "告诉你个好消息，我和{v}上周正式在一起了。",
                ],
            },
            "ask": "{name}的伴侣是谁？",
        },
        "car": {
            "values": ["特斯拉", "比亚迪", "丰田", "本田", "宝马", "大众", "蔚来", "小鹏"],
            "state": {
                "tuned": ["我开{v}上班。", "我的车是{v}。"],
                "held_out": [
                    "我开的是{v}。",
                    "我每天开{v}上下班，单程四十分钟左右。",
                    "我的车是{v}，到现在开着都挺省心的。",
                ],
            },
            "change": {
                "tuned": ["我上周买了一辆{v}。", "我换了一辆{v}，开起来很舒服。"],
                "held_out": [
                    "我刚提了一辆{v}！",
                    "我们把旧车卖了，昨天换了辆{v}。",
                    "上周我终于买了{v}，可以自驾游了。",
                ],
            },
            "ask": "{name}开什么车？",
        },
        "school": {
            "values": ["北京大学", "复旦大学", "浙江大学", "南京大学", "武汉大学", "中山大学", "四川大学", "厦门大学"],
            "state": {
                "tuned": ["我在{v}读书。", "我在{v}上学。"],
                "held_out": ["我在{v}读书。", "我是{v}的学生，现在读大二。", "我在{v}上学，期末考试一般在一月份。"],
            },
            "change": {
                "tuned": ["我转学到了{v}。", "我考上了{v}。"],
                "held_out": [
                    "我刚转学到{v}了。",
                    "我考上了{v}，这周已经开学了！",
                    "这学期我开始在{v}读研了，校园特别大。",
                ],
            },
            "ask": "{name}在哪里上学？",
        },
    },
}
CONTROLS = {
    "en": {
        "someone_else": {
            "tuned": ["My sister moved to {other} last week."],
            "held_out": [
                "My sister just moved to {other}.",
                "A colleague of mine relocated to {other} last week, so the team feels a bit empty.",
                "My best friend finally settled in {other} after years of talking about it.",
            ],
        },
        "restatement": {
            "tuned": ["I still live in {v}, I reminded my landlord of it today."],
            "held_out": [
                "Like I said, I'm still in {v}.",
                "The weather here in {v} has been awful all week.",
                "Since I live in {v}, can you suggest some weekend day trips nearby?",
            ],
        },
        "addition": {
            "tuned": ["I also adopted a {s} called {other}."],
            "held_out": [
                "We also got a second {s}, called {other}.",
                "On top of my first pet, I just adopted another {s} named {other}.",
                "My family grew again: we added a {s} called {other} alongside the one we already have.",
            ],
        },
    },
    "zh": {
        "someone_else": {
            "tuned": ["我姐姐上周搬到了{other}。"],
            "held_out": [
                "我姐姐刚搬到{other}去了。",
                "我一个同事上周调去{other}了，组里一下子冷清了不少。",
                "我邻居一家已经搬到{other}了，房子现在空着。",
            ],
        },
        "restatement": {
            "tuned": ["我还住在{v}。"],
            "held_out": [
                "我还是住在{v}，没搬家。",
                "{v}这边这周一直在下雨，烦死了。",
                "我住{v}嘛，你帮我推荐几个周边周末能去的地方。",
            ],
        },
        "addition": {
            "tuned": ["我还养了一只{s}，叫{other}。"],
            "held_out": [
                "我又养了一只{s}，叫{other}。",
                "家里除了原来那只，现在还多了一只{s}，叫{other}。",
                "我们最近又领养了第二只{s}，起名叫{other}。",
            ],
        },
    },
}
CONTROL_ATTRIBUTE = {"someone_else": "residence", "restatement": "residence", "addition": "pet"}
FILLER = {
    "en": ["How was your weekend?", "The weather has been strange lately.", "Thanks for the tips yesterday."],
    "zh": ["周末过得怎么样？", "最近天气有点怪。", "谢谢你昨天的建议。"],
}


@dataclass
class Change:
    attribute: str
    old: str
    new: str
    wording: str


@dataclass
class User:
    user_id: str
    name: str
    language: str
    wording: str
    first: list[str] = field(default_factory=list)
    second: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    control: tuple[str, str, str] | None = None
    """(kind, attribute, the value that must stay current)."""


def _article(value: str) -> str:
    return "an" if value[:1].lower() in "aeiou" else "a"


def _said(template: str, value: str, **extra: str) -> str:
    return template.format(v=value, a=_article(value), **extra)


def generate(count: int, seed: int) -> list[User]:
    """``count`` users, alternately English and Chinese (two of three English), each with three attributes stated in
    the first session, two or three of them changed in the second, one wording set per user."""
    rng = random.Random(seed)
    users = []
    for i in range(count):
        language = "zh" if i % 3 == 2 else "en"
        table = WORDINGS[language]
        wording = "held_out" if i % 2 else "tuned"
        name = (EN_NAMES if language == "en" else ZH_NAMES)[i % 12]
        user = User(f"ku_{i:04d}", name, language, wording)
        control = ("someone_else", "restatement", "addition")[i % 3] if i % 3 == 0 or i % 5 == 0 else None
        attributes = rng.sample(sorted(table), 3)
        if control and CONTROL_ATTRIBUTE[control] not in attributes:
            attributes[0] = CONTROL_ATTRIBUTE[control]
        changed = [a for a in attributes if not (control and a == CONTROL_ATTRIBUTE[control])]
        changed = changed[: rng.choice((2, 3))]
        for attribute in attributes:
            spec = table[attribute]
            old, new = rng.sample(spec["values"], 2)
            species = rng.choice(spec.get("species", [""]))
            new_species = rng.choice(spec.get("species", [""]))
            user.first.append(_said(rng.choice(spec["state"][wording]), old, s=species))
            if attribute in changed:
                template = rng.choice(spec["change"][wording])
                user.second.append(_said(template, new, s=new_species, old=old))
                user.changes.append(Change(attribute, old, new, wording))
            elif control:
                other = rng.choice([v for v in spec["values"] if v != old])
                template = rng.choice(CONTROLS[language][control][wording])
                user.second.append(template.format(v=old, s=new_species or "dog", other=other))
                user.control = (control, attribute, old)
        user.first.insert(1, rng.choice(FILLER[language]))
        user.second.insert(0, rng.choice(FILLER[language]))
        rng.shuffle(user.second)
        users.append(user)
    return users


async def tell(client: httpx.AsyncClient, user: User) -> None:
    for session, (start, lines) in enumerate(((JANUARY, user.first), (JUNE, user.second))):
        group = f"{user.user_id}_s{session + 1}"
        for n, line in enumerate(lines):
            at = start + timedelta(minutes=2 * n)
            await post_json(
                client,
                "/api/v3/agentic/memorize",
                {
                    "message_id": f"{group}_{n}",
                    "create_time": at.isoformat(),
                    "sender": user.user_id,
                    "sender_name": user.name,
                    "content": line,
                    "group_id": group,
                },
            )
        await post_json(client, "/api/v3/agentic/flush", {"group_id": group})


async def ask(client: httpx.AsyncClient, user: User, attribute: str, memory_type: str) -> list[str]:
    question = WORDINGS[user.language][attribute]["ask"].format(name=user.name)
    found = await post_json(
        client,
        "/api/v3/agentic/retrieve_lightweight",
        {
            "query": question,
            "user_id": user.user_id,
            "data_source": memory_type,
            "top_k": 10,
        },
    )
    return [memory["content"] for memory in found["result"]["memories"]]


def scores(contents: list[str], old: str, new: str) -> dict[str, bool]:
    """``current_first``: the first memory found that states either value states the new one; ``current@1``,
    ``current@5``: the new value in the first one, in the first five; ``stale_hidden``: none of the 10 found states
    only the old value."""
    stating = [text for text in contents if new in text or old in text]
    stale = [text for text in contents if old in text and new not in text]
    return {
        "current_first": bool(stating) and new in stating[0],
        "current@1": bool(contents) and new in contents[0],
        "current@5": any(new in text for text in contents[:5]),
        "stale_hidden": not stale,
    }


async def measure(base_url: str, users: list[User], concurrency: int) -> dict:
    limits = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        started = time.perf_counter()

        async def one(user: User) -> None:
            async with limits:
                await tell(client, user)

        await asyncio.gather(*(one(user) for user in users))
        formed_s = time.perf_counter() - started
        outcomes: list[dict] = []
        misses: list[dict] = []
        controls: list[dict] = []
        history_complete = [0, 0]
        for user in users:
            for change in user.changes:
                for memory_type in MEMORY_TYPES:
                    contents = await ask(client, user, change.attribute, memory_type)
                    scored = scores(contents, change.old, change.new)
                    outcomes.append(
                        {
                            "attribute": change.attribute,
                            "language": user.language,
                            "wording": change.wording,
                            "memory_type": memory_type,
                            **scored,
                        }
                    )
                    if not scored["current_first"]:
                        misses.append(
                            {
                                "user_id": user.user_id,
                                "attribute": change.attribute,
                                "old": change.old,
                                "new": change.new,
                                "wording": change.wording,
                                "memory_type": memory_type,
                                "found": contents[:3],
                            }
                        )
            superseded = await _superseded_of(client, user)
            for memory_id, _content in superseded:
                events = (await client.get(f"/api/v3/agentic/memories/{memory_id}/history")).json()["result"]["events"]
                kinds = [event["event"] for event in events]
                history_complete[1] += 1
                history_complete[0] += kinds[:1] == ["formed"] and "superseded" in kinds
            if user.control:
                kind, attribute, kept = user.control
                wrong = any(kept in content for _, content in superseded)
                controls.append(
                    {"kind": kind, "language": user.language, "wording": user.wording, "wrongly_superseded": wrong}
                )
    return {
        "formed_s": round(formed_s, 1),
        "outcomes": outcomes,
        "controls": controls,
        "history_complete": history_complete,
        "misses": misses,
    }


async def _superseded_of(client: httpx.AsyncClient, user: User) -> list[tuple[str, str]]:
    """The user's superseded memories (id, content), found by searching with include_superseded."""
    found = []
    for memory_type in MEMORY_TYPES:
        answer = await post_json(
            client,
            "/api/v3/agentic/retrieve_lightweight",
            {
                "query": " ".join(user.first),
                "user_id": user.user_id,
                "data_source": memory_type,
                "top_k": 100,
                "include_superseded": True,
                "retrieval_mode": "embedding",
            },
        )
        found += [(m["id"], m["content"]) for m in answer["result"]["memories"] if m["status"] == "superseded"]
    return found


def summarise(outcomes: list[dict], by: tuple[str, ...]) -> list[dict]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for outcome in outcomes:
        groups[tuple(outcome[key] for key in by)].append(outcome)
    rows = []
    for key, items in sorted(groups.items()):
        rows.append(
            {
                **dict(zip(by, key, strict=True)),
                "n": len(items),
                **{metric: round(sum(item[metric] for item in items) / len(items), 3) for metric in METRICS},
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=240)
    parser.add_argument("--seed", type=int, default=54)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--url", help="a running memsys (default: start one on a fresh embedded database)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    arguments = parser.parse_args()
    users = generate(arguments.users, arguments.seed)
    with memsys_server(arguments.url) as url:
        measured = asyncio.run(measure(url, users, arguments.concurrency))
    outcomes, controls = measured["outcomes"], measured["controls"]
    tables = {
        "overall": summarise([{**o, "all": "all"} for o in outcomes], ("all", "memory_type")),
        "by_wording": summarise(outcomes, ("wording", "memory_type")),
        "by_language": summarise(outcomes, ("language", "memory_type")),
        "by_attribute": summarise(outcomes, ("attribute", "memory_type")),
    }
    wrong = sum(c["wrongly_superseded"] for c in controls)
    done, total = measured["history_complete"]
    results = {
        **tables,
        "controls": {
            "n": len(controls),
            "wrongly_superseded": wrong,
            "rate": round(wrong / len(controls), 4) if controls else None,
            "by_kind": {
                kind: sum(c["wrongly_superseded"] for c in controls if c["kind"] == kind)
                for kind in ("someone_else", "restatement", "addition")
            },
            "by_wording": {
                wording: sum(c["wrongly_superseded"] for c in controls if c["wording"] == wording)
                for wording in ("tuned", "held_out")
            },
        },
        "history_complete": {"superseded": total, "complete": done},
        "formed_s": measured["formed_s"],
        "misses": measured["misses"],
        "mode": "offline (MEMSYS_SUPERSESSION=auto, no LLM)",
    }
    for title, rows in tables.items():
        print(f"\n{title}")
        print_table(rows, [c for c in rows[0] if c != "n"] + ["n"] if rows else [])
    print(f"\ncontrols: {wrong} of {len(controls)} wrongly superseded; history complete {done}/{total}")
    config = {"users": arguments.users, "seed": arguments.seed, "changes": len(outcomes) // len(MEMORY_TYPES)}
    path = save("knowledge_updates", config, results, arguments.out)
    panels = {
        f"{wording} wordings": {
            memory_type: ([1, 2, 3, 4], [row[m] for m in METRICS])
            for row in tables["by_wording"]
            if row["wording"] == wording
            for memory_type in [row["memory_type"]]
        }
        for wording in ("tuned", "held_out")
    }
    panel_plot(
        path.with_suffix(".png"),
        panels,
        xlabel="1: current first, 2: current @1, 3: @5, 4: stale hidden",
        ylabel="rate",
    )
    print(f"saved {path}")


if __name__ == "__main__":
    main()
