"""Facts a speaker states about themselves, read without a model: what supersession and the offline profile work on.

A fact is (whose, attribute, value): "I moved to Berlin last month" is (the sender, ``residence``, berlin). Only
first-person statements in the present or a completed change count, in English and Chinese; what someone else did
("my sister moved to Berlin"), what used to be ("I used to live in Paris", "I lived in Paris"), what may be ("if I
moved to Berlin", "I want to move", "我想搬到柏林") and questions are not facts about the speaker now. Each pattern
is a whole phrase ("I live in <Place>", "my cat <Name>", "我住在<地方>"): precision over recall, as a wrong fact would
supersede a true memory (docs/memories.md measures both).

An attribute is **single** (one current value: where one lives, one's job, employer, partner, diet, car, school, pet,
name) or **many** (allergies, languages: a new one adds, never replaces). A single fact said with "also", "another",
"too", "as well" (还, 也, 又) adds too: "I also adopted a dog" keeps the cat.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

SINGLE = ("residence", "job", "employer", "partner", "diet", "car", "school", "pet", "name")
MANY = ("allergy", "language")


@dataclass(frozen=True)
class Fact:
    user: str
    attribute: str
    value: str
    """Normalised: lower case, no article; a pet's is ``species:name`` (the name may be empty)."""
    shown: str
    """The value as written, for a sentence a reader sees."""
    adds: bool = False
    """Said as an addition ("also", "another"): it replaces nothing."""

    def as_json(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not False}


def same_value(attribute: str, a: str, b: str) -> bool:
    """Whether two values of ``attribute`` say the same (a restatement): a pet named once and not the other time is
    the same pet if of the same species."""
    if attribute == "pet":
        species_a, _, name_a = a.partition(":")
        species_b, _, name_b = b.partition(":")
        return species_a == species_b and (not name_a or not name_b or name_a == name_b)
    return a == b


def replaces(fact: dict[str, Any]) -> bool:
    """Whether a newer statement of this fact makes an earlier, different value of it outdated."""
    return fact["attribute"] in SINGLE and not fact.get("adds")


# --- English ---------------------------------------------------------------------------------------------------

_PLACE = r"(?P<v>[A-Z][\w'’.-]*(?:(?:[ -](?:de|del|da|am|upon|on|la|le))?[ -][A-Z][\w'’.-]*){0,3})"
_ORG = r"(?P<v>(?:the )?[A-Z][\w&'’.-]*(?: (?:of|for|and|&) [A-Z][\w&'’.-]*| [A-Z0-9][\w&'’.-]*){0,4})"
_NAME = r"(?P<name>[A-Z][a-zà-ÿ]+)"
_PHRASE_END = r"(?=$|[,.;:!?)]| (?:at|for|in|and|but|since|now|these|this|so|because|with|who|which|full|part|too)\b)"
_JOB = r"(?P<v>[a-z][a-z'-]*(?: [a-z][a-z'-]*){0,3}?)" + _PHRASE_END
_JOB_WORDS = (
    "nurse|doctor|physician|surgeon|dentist|pharmacist|paramedic|midwife|therapist|psychologist|vet|veterinarian|"
    "teacher|professor|lecturer|tutor|librarian|student|researcher|scientist|engineer|developer|programmer|designer|"
    "architect|lawyer|attorney|accountant|banker|analyst|consultant|manager|chef|cook|baker|barista|waiter|waitress|"
    "bartender|pilot|driver|mechanic|electrician|plumber|carpenter|firefighter|officer|detective|soldier|farmer|"
    "writer|author|journalist|editor|photographer|artist|painter|musician|singer|actor|actress|dancer|translator|"
    "cashier|receptionist|secretary|salesperson|entrepreneur|freelancer|founder|social worker|police officer|"
    "data scientist|software developer|software engineer|web developer|graphic designer|real estate agent|"
    "flight attendant|personal trainer|yoga instructor|counselor|counsellor|coach"
)
_SPECIES = (
    r"(?P<species>cat|kitten|dog|puppy|parrot|rabbit|bunny|hamster|goldfish|fish|turtle|tortoise|bird|horse|"
    r"guinea pig|snake|lizard|ferret|gecko|budgie|chinchilla)"
)
_DIETS = r"(?P<v>vegetarian|vegan|pescatarian|pescetarian|flexitarian|carnivore|keto|paleo|gluten-free|low-carb)"
_CAR_BRANDS = (
    r"(?:Tesla|Toyota|Honda|Ford|BMW|Audi|Volkswagen|VW|Mercedes(?:-Benz)?|Volvo|Nissan|Mazda|Subaru|Kia|Hyundai|"
    r"Chevrolet|Chevy|Jeep|Porsche|Fiat|Renault|Peugeot|Citro[eë]n|Skoda|Škoda|Lexus|Mini|Prius|Jaguar|Land Rover|"
    r"Range Rover|Dodge|Ram|Cadillac|Buick|GMC|Rivian|Polestar|BYD|Seat|Opel|Suzuki|Mitsubishi|Alfa Romeo|Saab)"
)
_CAR = rf"(?P<v>{_CAR_BRANDS}(?: [A-Z0-9][\w-]*){{0,2}})"
_PARTNERS = r"(?P<rel>boyfriend|girlfriend|husband|wife|partner|fianc[ée]e?|spouse)"
_SCHOOL = r"(?P<v>(?:the )?[A-Z][\w'’.-]*(?: (?:of|for|and) [A-Z][\w'’.-]*| [A-Z][\w'’.-]*){0,5})"
_LANGUAGE = r"(?P<v>[A-Z][a-z]+(?:(?:, | and )[A-Z][a-z]+)*)"
_NOW = r"(?:also |now |currently |still |just |recently |finally |actually ){0,2}"

_ENGLISH: list[tuple[str, re.Pattern[str]]] = [
    (attribute, re.compile(pattern))
    for attribute, pattern in (
        ("residence", rf"\b(?:I|[Ww]e)(?:'ve| have)? {_NOW}(?:moved|relocated) (?:back )?(?:here )?to {_PLACE}"),
        ("residence", rf"\b(?:I|[Ww]e) {_NOW}live (?:in|at) {_PLACE}"),
        ("residence", rf"\bI(?:'m| am) {_NOW}(?:living|based|settled) in {_PLACE}"),
        ("residence", rf"\b[Mm]y (?:new )?(?:home|apartment|flat|place) is in {_PLACE}"),
        ("job", rf"\bI {_NOW}work as (?:an? )?{_JOB}"),
        ("job", rf"\bI\b[^.;!?]*? and {_NOW}work as (?:an? )?{_JOB}"),
        ("job", rf"\bI(?:'m| am) {_NOW}(?:working|employed) as (?:an? )?{_JOB}"),
        ("job", rf"\b[Mm]y (?:new )?job is (?:being )?(?:an? )?{_JOB}"),
        ("job", rf"\bI(?:'ve| have)? {_NOW}(?:became|become) (?:an? )?(?P<v>(?:[a-z]+ )?(?:{_JOB_WORDS}))\b"),
        ("job", rf"\bI(?:'m| am) {_NOW}(?:an? )(?P<v>(?:[a-z]+ )?(?:{_JOB_WORDS}))\b(?! (?:friend|fan|of)\b)"),
        ("job", r"\bI(?:'m| am| have| just)? (?:now )?(?P<v>retired)\b"),
        ("employer", rf"\bI {_NOW}work (?:at|for) {_ORG}"),
        ("employer", rf"\bI(?:'m| am) {_NOW}working (?:at|for) {_ORG}"),
        ("employer", rf"\bI(?:'ve| have)? {_NOW}(?:started|got) (?:a new job|a job|working) (?:at|with|for) {_ORG}"),
        ("employer", rf"\bI(?:'ve| have)? {_NOW}joined {_ORG}"),
        ("pet", rf"\b[Mm]y (?:new )?(?:little )?{_SPECIES},? (?:is )?(?:called |named )?{_NAME}"),
        (
            "pet",
            rf"\bI {_NOW}(?:adopted|got|have|bought|rescued|took in) (?:a|an|another|a second) (?:new )?"
            rf"(?:\w+ )?{_SPECIES}\b(?:,? (?:called|named) {_NAME})?",
        ),
        ("partner", rf"\b[Mm]y (?:new )?{_PARTNERS},? {_NAME}"),
        ("partner", rf"\b[Mm]y (?:new )?{_PARTNERS}(?:'s name)? is (?:called |named )?{_NAME}"),
        ("partner", rf"\bI(?:'m| am) {_NOW}(?:dating|seeing|married to|engaged to|in a relationship with) {_NAME}"),
        ("partner", rf"\bI(?:'ve| have)? {_NOW}(?:married|started dating|started seeing|got engaged to) {_NAME}"),
        ("partner", rf"\bI(?:'ve| have)? {_NOW}(?:broke up with|split up with|divorced|separated from)\b"),
        ("diet", rf"\bI(?:'m| am) {_NOW}(?:a |an )?{_DIETS}\b(?! (?:restaurant|place|recipe|dish|food|friend)s?\b)"),
        (
            "diet",
            rf"\bI(?:'ve| have)? {_NOW}(?:went|gone|become|became|turned|switched to being|started being) {_DIETS}",
        ),
        ("diet", rf"\bI(?:'m| am) {_NOW}(?:on|following|doing) (?:a |the )?{_DIETS} diet"),
        ("diet", r"\bI(?:'ve| have)? (?:now |just )?(?:started eating meat|eat meat again|went back to eating meat)"),
        ("diet", r"\bI(?:'m| am) no longer (?:a |an )?(?:vegetarian|vegan|pescatarian)"),
        ("car", rf"\bI {_NOW}drive (?:a|an) (?:(?:new|used|old|red|blue|black|white|silver|grey|gray|green) )*{_CAR}"),
        (
            "car",
            rf"\b[Mm]y (?:new )?car is (?:a|an) (?:(?:new|used|old|red|blue|black|white|silver|grey|gray) )*{_CAR}",
        ),
        (
            "car",
            rf"\bI(?:'ve| have)? {_NOW}(?:bought|got|leased) (?:myself )?(?:a|an) (?:new |used )?"
            rf"(?:(?:red|blue|black|white|silver|grey|gray|green) )?{_CAR}",
        ),
        ("school", rf"\bI {_NOW}(?:study|go to school) at {_SCHOOL}"),
        ("school", rf"\bI(?:'m| am) {_NOW}(?:studying|enrolled|a student) (?:at|in) {_SCHOOL}"),
        ("school", rf"\bI(?:'ve| have)? {_NOW}(?:transferred|switched) to {_SCHOOL}"),
        ("school", rf"\bI {_NOW}(?:attend|started at|enrolled at) {_SCHOOL}"),
        ("allergy", r"\bI(?:'m| am) (?:very |severely |really )?allergic to (?P<v>[a-z][a-z -]{1,30}?)" + _PHRASE_END),
        (
            "allergy",
            r"\bI(?:'m| am)\b[^.;!?]*? and (?:very |severely )?allergic to (?P<v>[a-z][a-z -]{1,30}?)" + _PHRASE_END,
        ),
        ("allergy", r"\b[Mm]y (?P<v>[a-z]+(?: [a-z]+)?) allergy\b"),
        ("language", rf"\bI {_NOW}(?:speak|am learning|'m learning|learned|learnt) {_LANGUAGE}"),
        ("name", r"\b[Mm]y name is (?P<v>[A-Z][a-z]+(?: [A-Z][a-z]+)?)"),
    )
]

_MAYBE_EN = re.compile(
    r"\b(?:if|would|could|might|maybe|perhaps|whether|wish|hope to|want to|wanted to|plan to|planning to|"
    r"thinking (?:about|of)|considering|dream(?:ing)? of|used to|never|not|don't|didn't|won't|wasn't)\b",
    re.IGNORECASE,
)
_ADDS_EN = re.compile(r"\b(?:also|another|too|as well|a second|second|additionally|new addition)\b", re.IGNORECASE)
_NOT_VALUES = frozenset(
    {"i", "the", "a", "my", "it", "there", "here", "home", "so", "very", "really", "bit", "little", "lot", "big"}
)
_ARTICLE = re.compile(r"^(?:the|a|an) ")

# --- Chinese ---------------------------------------------------------------------------------------------------

_HAN = "\u4e00-\u9fff"
_ZH_END = r"(?=$|[，。！？；、,.!?;\s]|了|啦|呢|吧|啊|哦|去|住|工作|上班|生活|定居|读书|上学|念书)"
_ZH_PLACE = rf"(?P<v>[{_HAN}]{{2,8}}?)"
_ZH_NOW = r"(?:现在|目前|已经|刚|刚刚|最近|终于|上个月|这个月|上周|上星期|昨天|今天|前几天|今年|去年)?"
_ZH_SPECIES = r"(?P<species>猫咪|小猫|猫|狗狗|小狗|狗|兔子|鹦鹉|仓鼠|金鱼|乌龟|鸟)"
_ZH_NAME = rf"(?P<name>[{_HAN}A-Za-z]{{1,6}}?)"
_ZH_CARS = (
    r"(?P<v>(?:特斯拉|丰田|本田|宝马|奔驰|奥迪|大众|比亚迪|蔚来|小鹏|理想|福特|日产|马自达|沃尔沃|保时捷|吉利|长城|"
    r"现代|起亚|雷克萨斯|五菱|红旗|别克|雪佛兰|小米)[A-Za-z0-9]*(?:Model ?[A-Z0-9]|[A-Z0-9]{1,3})?)"
)
_ZH_JOB = rf"(?P<v>[{_HAN}]{{2,8}}?)"

_CHINESE: list[tuple[str, re.Pattern[str]]] = [
    (attribute, re.compile(pattern))
    for attribute, pattern in (
        (
            "residence",
            rf"我{_ZH_NOW}(?:搬到了|搬到|搬去了|搬去|搬家到了|搬家到|移居到?|定居在|定居)(?:了)?{_ZH_PLACE}(?:市)?{_ZH_END}",
        ),
        ("residence", rf"我{_ZH_NOW}(?:住在|生活在|住)(?!过){_ZH_PLACE}(?:市)?{_ZH_END}"),
        ("residence", rf"我(?:的)?家{_ZH_NOW}在{_ZH_PLACE}(?:市)?{_ZH_END}"),
        ("job", rf"我{_ZH_NOW}(?:是|当)(?:一名|一个|一位|名|个)(?P<v>[{_HAN}]{{2,8}}?)(?=$|[，。！？；,.!?\s]|了|啦)"),
        (
            "job",
            rf"我{_ZH_NOW}(?:当上了|成为了|成了|转行做|转行当|改行做|改行当)(?:一名|一个|一位)?{_ZH_JOB}(?=$|[，。！？；,.!?\s]|了|啦)",
        ),
        (
            "job",
            rf"^我(?![姐妹哥弟妈爸父母儿女朋们的家老])[^。！？]*?[，,]{_ZH_NOW}(?:是|当)(?:一名|一个|一位)"
            rf"(?P<v>[{_HAN}]{{2,8}}?)(?=$|[，。！？；,.!?\s]|了|啦)",
        ),
        ("job", rf"我(?:现在|目前)?的(?:新)?工作是{_ZH_JOB}(?=$|[，。！？；,.!?\s]|了|啦)"),
        ("job", r"我(?:已经)?(?P<v>退休)了"),
        (
            "pet",
            rf"我(?:的|家)?(?:新)?{_ZH_SPECIES}(?:叫|名叫|的名字叫|名字叫)(?:做)?{_ZH_NAME}(?=$|[，。！？；,.!?\s]|了|啦)",
        ),
        (
            "pet",
            rf"我(?P<adds>还|也|又)?{_ZH_NOW}(?:新)?(?:养了|领养了|收养了|买了|有)(?:一只|一条|只|条)(?:小)?{_ZH_SPECIES}"
            rf"(?:[，,]?(?:叫|名叫|取名叫?|起名叫?){_ZH_NAME}(?=$|[，。！？；,.!?\s]|了|啦))?",
        ),
        (
            "partner",
            rf"我(?:的)?(?:新)?(?P<rel>男朋友|女朋友|男友|女友|老公|老婆|丈夫|妻子|对象|未婚夫|未婚妻)"
            rf"(?:叫|名叫|是){_ZH_NAME}(?=$|[，。！？；,.!?\s]|了|啦)",
        ),
        ("partner", rf"我{_ZH_NOW}(?:和|跟){_ZH_NAME}(?:结婚|订婚|在一起)了"),
        (
            "partner",
            rf"我{_ZH_NOW}(?:和|跟)(?:男朋友|女朋友|男友|女友|老公|老婆|对象)?(?:[{_HAN}]{{1,4}})?(?:分手|离婚)了",
        ),
        ("diet", rf"我{_ZH_NOW}(?:开始)?(?P<v>吃素|吃全素|吃纯素|是素食者|是素食主义者|成了素食者|成为素食者)"),
        ("diet", rf"我{_ZH_NOW}(?:又)?(?:开始)?(?P<v>吃肉)了"),
        ("diet", rf"我{_ZH_NOW}(?P<v>吃肉)(?=$|[，。！？；,.!?\s])"),
        ("diet", rf"我{_ZH_NOW}在(?:做|进行|坚持)?(?P<v>生酮|低碳水|无麸质)饮食"),
        ("car", rf"我{_ZH_NOW}(?:开|开的是|买了|换了|提了)(?:一辆|辆|台)?(?:新的?)?{_ZH_CARS}"),
        ("car", rf"我(?:的)?(?:新)?车是(?:一辆)?{_ZH_CARS}"),
        (
            "school",
            rf"我{_ZH_NOW}(?:在|转学到了?|考上了?|进了)(?P<v>[{_HAN}]{{2,12}}?(?:大学|学院|中学|小学|高中|初中|学校))",
        ),
        ("allergy", rf"我对(?P<v>[{_HAN}]{{1,6}}?)过敏"),
        ("language", rf"我{_ZH_NOW}(?:会说|会讲|在学|学会了)(?P<v>[{_HAN}]{{1,4}}语|[{_HAN}]{{1,3}}文)"),
        ("name", rf"我叫(?P<v>[{_HAN}]{{2,4}})(?=$|[，。！？；,.!?\s])"),
    )
]
_MAYBE_ZH = re.compile(r"如果|要是|假如|打算|计划|准备|想要?|希望|梦想|考虑|也许|可能|不|没|别|吗|？|\?|以前|曾经|过去")
_ADDS_ZH = re.compile(r"还|也|又|另一|第二")
_ZH_SPECIES_NAMES = {"猫咪": "猫", "小猫": "猫", "狗狗": "狗", "小狗": "狗"}
_EN_SPECIES_NAMES = {"kitten": "cat", "puppy": "dog", "bunny": "rabbit"}
_ZH_DIETS = {
    "吃素": "vegetarian",
    "是素食者": "vegetarian",
    "是素食主义者": "vegetarian",
    "成了素食者": "vegetarian",
    "成为素食者": "vegetarian",
    "吃全素": "vegan",
    "吃纯素": "vegan",
    "吃肉": "omnivore",
    "生酮": "keto",
    "低碳水": "low-carb",
    "无麸质": "gluten-free",
}

_SENTENCE = re.compile(r"[^.!?;。！？；\n]+[.!?;。！？；]?")


def facts_of(user: str, text: str) -> list[Fact]:
    """What ``user`` states about themselves in ``text`` (their own message), in order; one per attribute and
    sentence, and of an attribute with one value only the last."""
    found: list[Fact] = []
    for sentence in _SENTENCE.findall(text):
        seen: set[str] = set()
        for attribute, pattern in (*_ENGLISH, *_CHINESE):
            if attribute in seen:
                continue
            match = pattern.search(sentence)
            if match is None or _hedged(sentence, match):
                continue
            fact = _fact(user, attribute, match, sentence)
            if fact is not None:
                found.append(fact)
                seen.add(attribute)
    # Of one attribute with one value, the message's last statement is what it says now ("I broke up with Leo. I'm
    # dating Tom now."): the earlier ones are left out.
    last = {fact.attribute: i for i, fact in enumerate(found) if replaces(fact.as_json())}
    return [fact for i, fact in enumerate(found) if not replaces(fact.as_json()) or last[fact.attribute] == i]


def unstated(text: str) -> str:
    """``text`` without the phrases that state facts: what else the message says (``holds_more``)."""
    said = [False] * len(text)
    for _, pattern in (*_ENGLISH, *_CHINESE):
        for match in pattern.finditer(text):
            said[match.start() : match.end()] = [True] * (match.end() - match.start())
    return "".join(" " if hidden else char for char, hidden in zip(text, said, strict=True))


def _hedged(sentence: str, match: re.Match[str]) -> bool:
    """A conditional, a wish, a negation, a question or the past before the statement: not a fact now."""
    if sentence.rstrip().endswith(("?", "？")):
        return True
    clause = _CLAUSE.split(sentence[: match.start()])[-1]
    chinese = match.group(0)[:1] == "我"
    return (_MAYBE_ZH if chinese else _MAYBE_EN).search(clause) is not None


_CLAUSE = re.compile(r"[,，、:：]|\b(?:but|and|so|because|while|though|although)\b|但是?|而且|所以|因为|不过|可是")


def _fact(user: str, attribute: str, match: re.Match[str], sentence: str) -> Fact | None:
    groups = match.groupdict()
    chinese = match.group(0)[:1] == "我"
    adds = bool(groups.get("adds")) or bool((_ADDS_ZH if chinese else _ADDS_EN).search(sentence))
    if attribute == "pet":
        species = groups["species"]
        species = _ZH_SPECIES_NAMES.get(species, _EN_SPECIES_NAMES.get(species, species))
        name = (groups.get("name") or "").strip()
        if name.lower() in _NOT_VALUES:
            name = ""
        shown = f"{species} {name}".strip() if not chinese else f"{species}{name}"
        return Fact(user, attribute, f"{species}:{name.lower()}", shown, adds)
    if attribute == "partner":
        if groups.get("name") is None:  # a break-up: no partner now
            return Fact(user, attribute, "none", "no partner", False)
        name = groups["name"].strip()
        if name.lower() in _NOT_VALUES:
            return None
        return Fact(user, attribute, name.lower(), name, adds)
    if attribute == "diet":
        said = groups.get("v") or ""
        if chinese:
            value = _ZH_DIETS.get(said, said)
        elif said:
            value = said.lower().replace("pescetarian", "pescatarian")
        else:  # "I started eating meat again", "I'm no longer vegetarian"
            value = "omnivore"
        return Fact(user, attribute, value, value, False)
    shown = (groups.get("v") or "").strip(" ,.'’")
    value = _ARTICLE.sub("", shown.lower()).strip()
    if not value or value in _NOT_VALUES or (attribute == "job" and value.split()[-1] in _NOT_VALUES):
        return None
    if attribute == "language":
        return Fact(user, attribute, value, shown, True)
    return Fact(user, attribute, value, shown, adds and attribute in SINGLE)


# --- A fact as a sentence: the offline semantic memory ---------------------------------------------------------

_ENGLISH_SENTENCES = {
    "residence": "{name} lives in {value}.",
    "job": "{name} works as {article} {value}.",
    "employer": "{name} works at {value}.",
    "partner": "{name}'s partner is {value}.",
    "diet": "{name} is {value}.",
    "car": "{name} drives {article} {value}.",
    "school": "{name} studies at {value}.",
    "allergy": "{name} is allergic to {value}.",
    "language": "{name} speaks {value}.",
    "name": "{name}'s name is {value}.",
}
_CHINESE_SENTENCES = {
    "residence": "{name}住在{value}。",
    "job": "{name}是一名{value}。",
    "employer": "{name}在{value}工作。",
    "partner": "{name}的伴侣是{value}。",
    "diet": "{name}的饮食：{value}。",
    "car": "{name}开{value}。",
    "school": "{name}在{value}上学。",
    "allergy": "{name}对{value}过敏。",
    "language": "{name}会说{value}。",
    "name": "{name}的名字是{value}。",
}
_ZH_DIET_WORDS = {"vegetarian": "吃素", "vegan": "吃全素", "omnivore": "吃肉", "keto": "生酮饮食"}


def sentence(fact: Fact, name: str, language: str) -> str:
    """The fact as a reader would write it: "Alice lives in Berlin.", "小李住在柏林。"."""
    zh = language == "zh"
    if fact.attribute == "pet":
        species, _, pet_name = fact.value.partition(":")
        shown_name = fact.shown[len(species) :].strip() if zh else fact.shown.partition(" ")[2]
        if zh:
            return f"{name}养了一只{species}" + (f"，叫{shown_name}。" if shown_name else "。")
        return f"{name} has a {species}" + (f" called {shown_name}." if pet_name else ".")
    if fact.attribute == "partner" and fact.value == "none":
        return f"{name}目前没有伴侣。" if zh else f"{name} has no partner now."
    if zh and fact.attribute == "diet":
        return f"{name}{_ZH_DIET_WORDS.get(fact.value, fact.value)}。"
    template = (_CHINESE_SENTENCES if zh else _ENGLISH_SENTENCES)[fact.attribute]
    article = "an" if fact.shown[:1].lower() in "aeiou" else "a"
    return template.format(name=name, value=fact.shown, article=article)
