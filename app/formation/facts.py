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
    "teacher|professor|lecturer|tutor|librarian|researcher|scientist|engineer|developer|programmer|designer|"
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
_CAR_WORDS = r"(?:(?:brand[- ]new|new|used|old|second-hand|red|blue|black|white|silver|grey|gray|green) )*"
_CAR = rf"(?P<v>{_CAR_BRANDS}(?: [A-Z0-9][\w-]*){{0,2}})"
_PARTNERS = r"(?P<rel>boyfriend|girlfriend|husband|wife|partner|fianc[ée]e?|spouse)"
_SCHOOL = r"(?P<v>(?:the )?[A-Z][\w'’.-]*(?: (?:of|for|and) [A-Z][\w'’.-]*| [A-Z][\w'’.-]*){0,5})"
_LANGUAGE = r"(?P<v>[A-Z][a-z]+(?:(?:, | and )[A-Z][a-z]+)*)"
_NOW = r"(?:also |now |currently |still |just |recently |finally |actually |officially ){0,2}"
_SUBJECT = r"\b(?:I|[Ww]e)(?:'ve| have)? "
"""The speaker, then what they did on the way ("I changed careers and became", "we finally"): up to three words, none
of them another subject."""
_ON_THE_WAY = (
    r"(?:(?!(?:he|she|they|it|you|your|my|his|her|their|our|who|that|which|whose|someone|somebody|everyone|people|"
    r"friends?|family|parents|kids|children|sister|brother|mom|mum|dad|boss|colleagues?|neighbou?rs?)\b)[a-z]+ ){0,3}?"
    r"(?:and |then |so )?"
)
_JOB_NOUN = rf"(?P<v>(?:[a-z]+ )?(?:{_JOB_WORDS}))\b"
_NOT_A_DIET = r"(?! (?:restaurant|place|recipe|dish|food|friend)s?\b)"
_DIET_HOW = r"(?:fully |completely |strictly |mostly |totally |a strict |a full-time |a )?"
_SCHOOL_NAMED = (
    r"(?P<v>(?:the )?(?:[A-Z][\w'’.-]* ){0,4}?(?:[A-Z][\w'’.-]* )?"
    r"(?:University|College|School|Institute|Academy|Polytechnic|Conservatory|Conservatoire|Université|Universität)"
    r"(?: (?:of|for|in) [A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,2})?)"
)

_ENGLISH: list[tuple[str, re.Pattern[str]]] = [
    (attribute, re.compile(pattern))
    for attribute, pattern in (
        ("residence", rf"\b(?:I|[Ww]e)(?:'ve| have)? {_NOW}(?:moved|relocated) (?:back )?(?:here )?to {_PLACE}"),
        ("residence", rf"\b(?:I|[Ww]e) {_NOW}live (?:in|at) {_PLACE}"),
        ("residence", rf"\bI(?:'m| am) {_NOW}(?:living|based|settled) in {_PLACE}"),
        ("residence", rf"\b[Mm]y (?:new )?(?:home|apartment|flat|place) is (?:now )?in {_PLACE}"),
        ("residence", rf"\b[Hh]ome(?: for (?:me|us))? is (?:now )?{_PLACE}(?= now\b| these days\b|$|[,.;!])"),
        (
            "residence",
            rf"{_SUBJECT}{_NOW}{_ON_THE_WAY}{_NOW}(?:moved|relocated|settled|made the move|moved house|moved over)"
            rf"(?: down)? (?:back )?(?:to|in) {_PLACE}",
        ),
        ("residence", rf"{_SUBJECT}{_NOW}(?:been living|been based|settled down|put down roots) in {_PLACE}"),
        ("residence", rf"\b(?:I|[Ww]e) {_NOW}call {_PLACE} home\b"),
        ("residence", rf"\b(?:I|[Ww]e)(?:'re| are|'m| am) {_NOW}(?:living|based|settled) in {_PLACE}"),
        ("job", rf"\bI {_NOW}work as (?:an? )?{_JOB}"),
        ("job", rf"\bI\b[^.;!?]*? and {_NOW}work as (?:an? )?{_JOB}"),
        ("job", rf"\bI(?:'m| am) {_NOW}(?:working|employed) as (?:an? )?{_JOB}"),
        ("job", rf"\b[Mm]y (?:new )?job is (?:being )?(?:an? )?{_JOB}"),
        ("job", rf"\bI(?:'ve| have)? {_NOW}(?:became|become) (?:an? )?(?P<v>(?:[a-z]+ )?(?:{_JOB_WORDS}))\b"),
        ("job", rf"\bI(?:'m| am) {_NOW}(?:an? )(?P<v>(?:[a-z]+ )?(?:{_JOB_WORDS}))\b(?! (?:friend|fan|of)\b)"),
        ("job", r"\bI(?:'m| am| have| just)? (?:now )?(?P<v>retired)\b"),
        (
            "job",
            rf"{_SUBJECT}{_NOW}{_ON_THE_WAY}{_NOW}(?:became|become|started(?: working| work| out)? as|"
            rf"(?:got|landed|took|accepted|found|started) (?:a |my )?(?:new |first )?(?:job|position|role|gig) as|"
            rf"(?:was|been|got) (?:hired|taken on|promoted|employed) as|work as|am now|'m now) (?:an? )?{_JOB_NOUN}",
        ),
        ("job", rf"\bI(?:'m| am) {_NOW}(?:an? )?{_JOB_NOUN} by (?:trade|profession)"),
        (
            "job",
            rf"\b[Mm]y (?:new )?(?:job|profession|occupation|role|position)(?: title)?(?: is|:) (?:now )?(?:an? )?"
            rf"{_JOB_NOUN}",
        ),
        ("job", rf"\bI {_NOW}work (?:in|at) [^,.;!?]{{1,40}}? as (?:an? )?{_JOB_NOUN}"),
        ("employer", rf"\bI {_NOW}work (?:at|for) {_ORG}"),
        ("employer", rf"\bI(?:'m| am) {_NOW}working (?:at|for) {_ORG}"),
        ("employer", rf"\bI(?:'ve| have)? {_NOW}(?:started|got) (?:a new job|a job|working) (?:at|with|for) {_ORG}"),
        ("employer", rf"\bI(?:'ve| have)? {_NOW}joined {_ORG}"),
        ("pet", rf"\b[Mm]y (?:new )?(?:little )?{_SPECIES},? (?:is )?(?:called |named )?{_NAME}"),
        ("pet", rf"\b[Mm]y (?:new )?(?:little )?{_SPECIES}'s name is {_NAME}"),
        ("pet", rf"^{_NAME} is my (?:new )?(?:little )?{_SPECIES}"),
        (
            "pet",
            rf"{_SUBJECT}{_NOW}{_ON_THE_WAY}{_NOW}(?:adopted|got|have|bought|rescued|took in|picked up|brought home|"
            rf"welcomed|ended up with|got ourselves|got myself) (?:a|an|another|a second) (?:new )?"
            rf"(?:\w+ )?{_SPECIES}\b(?:,? (?:called|named|whose name is|[-–—]|,) ?{_NAME})?",
        ),
        ("partner", rf"\b[Mm]y (?:new )?{_PARTNERS},? {_NAME}"),
        ("partner", rf"\b[Mm]y (?:new )?{_PARTNERS}(?:'s name)? is (?:called |named )?{_NAME}"),
        ("partner", rf"\bI(?:'m| am) {_NOW}(?:dating|seeing|married to|engaged to|in a relationship with) {_NAME}"),
        ("partner", rf"\bI(?:'ve| have)? {_NOW}(?:married|started dating|started seeing|got engaged to) {_NAME}"),
        (
            "partner",
            rf"\bI(?:'ve| have)? {_NOW}(?:been seeing|been dating|been going out with|started going out with|"
            rf"got together with|gotten together with|moved in with|fallen for|fell for) {_NAME}",
        ),
        (
            "partner",
            rf"\b{_NAME} and I (?:are|have been|got|just got) {_NOW}(?:dating|together|engaged|married|a couple)",
        ),
        ("partner", rf"\bI(?:'m| am) {_NOW}(?:seeing|dating) someone(?: new)?(?: now)?,? {_NAME}"),
        ("partner", rf"^{_NAME} is my (?:new )?{_PARTNERS}"),
        ("partner", rf"\bI(?:'ve| have)? {_NOW}(?:broke up with|split up with|divorced|separated from)\b"),
        ("diet", rf"\bI(?:'m| am) {_NOW}{_DIET_HOW}(?:an )?{_DIETS}\b{_NOT_A_DIET}"),
        ("diet", rf"\b[Mm]y diet is (?:now )?{_DIET_HOW}{_DIETS}"),
        (
            "diet",
            rf"{_SUBJECT}{_NOW}{_ON_THE_WAY}{_NOW}(?:been|gone|went|turned|become|became|switched|eaten|eat|eating)"
            rf" {_DIET_HOW}{_DIETS}\b{_NOT_A_DIET}",
        ),
        (
            "diet",
            rf"{_SUBJECT}{_NOW}(?:switched|moved|changed|converted|gone over|went over) to (?:a |being )?"
            rf"{_DIET_HOW}{_DIETS}",
        ),
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
            rf"\bI(?:'m| am|'ve been| have been) {_NOW}driving (?:a|an) {_CAR_WORDS}{_CAR}",
        ),
        (
            "car",
            rf"{_SUBJECT}{_NOW}{_ON_THE_WAY}{_NOW}(?:picked up|switched to|upgraded to|traded [^,.;!?]{{1,30}}? for|"
            rf"ended up with|treated myself to|bought|got|leased|finally got) (?:a|an|my|our) {_CAR_WORDS}{_CAR}",
        ),
        (
            "car",
            rf"\b[Mm]y (?:new )?(?:car|ride|daily driver) is (?:now )?(?:a|an|the) {_CAR_WORDS}{_CAR}",
        ),
        (
            "car",
            rf"\bI {_NOW}(?:commute|get around|drive around|drive to work|go to work) in (?:my|a|an) "
            rf"{_CAR_WORDS}{_CAR}",
        ),
        (
            "car",
            rf"\bI(?:'ve| have)? {_NOW}(?:bought|got|leased) (?:myself )?(?:a|an) (?:brand[- ]new |new |used )?"
            rf"(?:(?:red|blue|black|white|silver|grey|gray|green) )?{_CAR}",
        ),
        ("school", rf"\bI {_NOW}(?:study|go to school) at {_SCHOOL}"),
        ("school", rf"\bI(?:'m| am) {_NOW}(?:studying|enrolled|a student) (?:at|in) {_SCHOOL}"),
        ("school", rf"\bI(?:'ve| have)? {_NOW}(?:transferred|switched) to {_SCHOOL}"),
        ("school", rf"\bI {_NOW}(?:attend|started at|enrolled at) {_SCHOOL}"),
        (
            "school",
            rf"{_SUBJECT}{_NOW}{_ON_THE_WAY}{_NOW}(?:got into|(?:been|got|was) accepted (?:to|at|into|by)|"
            rf"(?:been|got|was) admitted to|started (?:at|classes at|school at)|go to|started studying at|"
            rf"began (?:at|studying at)|enrolled (?:at|in)|switched schools to) {_SCHOOL_NAMED}",
        ),
        (
            "school",
            rf"\bI(?:'m| am) {_NOW}(?:doing|taking|finishing|starting|pursuing) (?:my |a |an )?(?:[\w'’-]+ ){{0,3}}?"
            rf"(?:degree|master'?s|masters|PhD|doctorate|bachelor'?s|MBA|course|program|programme|studies) at "
            rf"{_SCHOOL_NAMED}",
        ),
        ("school", rf"\bI(?:'m| am) {_NOW}(?:now )?(?:at|attending) {_SCHOOL_NAMED}"),
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
_ADDS_EN = re.compile(r"\b(?:also|another|too|as well|a second|additionally|new addition)\b", re.IGNORECASE)
_GONE_EN = re.compile(
    r"\b(?:passed away|died|passed|lost|losing|put down|rehomed|re-homed|ran away|gone)\b", re.IGNORECASE
)
_NAMED_LATER_EN = re.compile(
    r"\b(?:(?:his|her|its|their) name is|(?:I|we) (?:named|called) (?:him|her|it|them)|named (?:him|her|it)|"
    r"(?:he|she|it)'s called|(?:he|she|it) is called) (?P<name>[A-Z][a-zà-ÿ]+)"
)
_NOT_VALUES = frozenset(
    {"i", "the", "a", "my", "it", "there", "here", "home", "so", "very", "really", "bit", "little", "lot", "big"}
)
_ARTICLE = re.compile(r"^(?:the|a|an) ")
_SCHOOL_WORD = re.compile(r"\b(?:University|College|School|Institute|Academy)\b")

# --- Chinese ---------------------------------------------------------------------------------------------------

_HAN = "\u4e00-\u9fff"
_ZH_END = r"(?=$|[，。！？；、,.!?;\s]|了|啦|呢|吧|啊|哦|嘛|呀|哈|呗|喔|去|住|工作|上班|生活|定居|读书|上学|念书)"
_ZH_PLACE = rf"(?P<v>[{_HAN}]{{2,8}}?)"
_ZH_NOW = (
    r"(?:现在|目前|已经|刚刚|刚|最近|终于|总算|平时|一直|每天|都|也|又|还|正式|开始|这周|这个月|这学期|上个月|上周|"
    r"上星期|昨天|今天|前几天|今年起?|去年|从(?:这个月|今年|上个月|这周|[一二三四五六七八九十\d]{1,2}月)(?:起|开始)?){0,4}"
)
"""What may stand between 我 and the verb: when, how often, already ("我这周刚开始当", "我平时都吃素")."""
_ZH_SPECIES = r"(?P<species>猫咪|小猫|猫|狗狗|小狗|狗|兔子|鹦鹉|仓鼠|金鱼|乌龟|鸟)"
_ZH_NAME = rf"(?P<name>[{_HAN}A-Za-z]{{1,6}}?)"
_ZH_CARS = (
    r"(?P<v>(?:特斯拉|丰田|本田|宝马|奔驰|奥迪|大众|比亚迪|蔚来|小鹏|理想|福特|日产|马自达|沃尔沃|保时捷|吉利|长城|"
    r"现代|起亚|雷克萨斯|五菱|红旗|别克|雪佛兰|小米)[A-Za-z0-9]*(?:Model ?[A-Z0-9]|[A-Z0-9]{1,3})?)"
)
_ZH_JOB = rf"(?P<v>[{_HAN}]{{2,8}}?)"
_ZH_JOB_WORD = (
    rf"(?P<v>[{_HAN}]{{0,4}}?(?:师|员|医生|护士|会计|记者|司机|警察|经理|老板|作家|演员|歌手|工人|编辑|主播|模特|秘书|顾问|"
    rf"助理|教授|博士后|老师|画家|作家|音乐家|科学家|设计师|翻译|厨子|快递小哥|外卖员|保安|店长|主管|总监|创业者|自由职业者))"
)
_ZH_NOT_JOBS = frozenset({"会员", "成员", "党员", "团员", "学员", "一员", "新成员", "粉丝"})
_ZH_WE = r"我(?:们)?"
_ZH_MY = r"我(?:们)?(?:的|家的?|家)?(?:现在的|目前的)?"

_CHINESE: list[tuple[str, re.Pattern[str]]] = [
    (attribute, re.compile(pattern))
    for attribute, pattern in (
        (
            "residence",
            rf"{_ZH_WE}{_ZH_NOW}(?:已经)?(?:搬到了|搬到|搬去了|搬去|搬回了?|搬家到了|搬家到|搬家去了?|移居到?|定居在|定居|"
            rf"落户|落户到|来到了|调到了?)(?:了)?{_ZH_PLACE}(?:市)?{_ZH_END}",
        ),
        ("residence", rf"{_ZH_WE}{_ZH_NOW}(?:住在|生活在|住)(?!过){_ZH_PLACE}(?:市)?{_ZH_END}"),
        ("residence", rf"{_ZH_WE}{_ZH_NOW}(?:已经)?在{_ZH_PLACE}(?:市)?(?:定居|安家|落户|扎根|住下|生活|住|安顿)"),
        ("residence", rf"{_ZH_WE}{_ZH_NOW}人在{_ZH_PLACE}{_ZH_END}"),
        ("residence", rf"我(?:的)?家{_ZH_NOW}在{_ZH_PLACE}(?:市)?{_ZH_END}"),
        ("job", rf"我{_ZH_NOW}(?:是|当)(?:一名|一个|一位|名|个)(?P<v>[{_HAN}]{{2,8}}?)(?=$|[，。！？；,.!?\s]|了|啦)"),
        (
            "job",
            rf"我{_ZH_NOW}(?:当上了|成为了|成了|转行做了?|转行当了?|转行成了?|改行做了?|改行当了?|转行成为了?)"
            rf"(?:一名|一个|一位)?{_ZH_JOB}(?=$|[，。！？；,.!?\s]|了|啦)",
        ),
        (
            "job",
            rf"^我(?![姐妹哥弟妈爸父母儿女朋的家老同邻])[^。！？]*?[，,]{_ZH_NOW}(?:是|当)(?:一名|一个|一位)"
            rf"(?P<v>[{_HAN}]{{2,8}}?)(?=$|[，。！？；,.!?\s]|了|啦)",
        ),
        ("job", rf"我(?:现在|目前)?的(?:新)?(?:工作|职业)是(?:一名)?{_ZH_JOB}(?=$|[，。！？；,.!?\s]|了|啦)"),
        (
            "job",
            rf"我{_ZH_NOW}(?:在)?(?:是|当|做|干|当了|做了|干起了|做起了)(?:一名|一个|一位)?{_ZH_JOB_WORD}"
            rf"(?=$|[，。！？；,.!?\s]|了|啦)",
        ),
        (
            "job",
            rf"我{_ZH_NOW}在[{_HAN}A-Za-z]{{2,12}}?(?:当|做|担任|上班当|工作当)(?:了)?(?:一名|一个|一位)?{_ZH_JOB_WORD}"
            rf"(?=$|[，。！？；,.!?\s]|了|啦)",
        ),
        (
            "job",
            rf"我{_ZH_NOW}(?:找到了|找了|得到了|拿到了|换了)(?:一份|份)?(?:新)?(?:的)?{_ZH_JOB_WORD}的(?:新)?工作",
        ),
        ("job", r"我(?:已经)?(?P<v>退休)了"),
        (
            "pet",
            rf"{_ZH_MY}(?:新)?(?:养的)?{_ZH_SPECIES}(?:叫|名叫|的名字叫|名字叫|的名字是|名字是)(?:做)?{_ZH_NAME}"
            rf"(?=$|[，。！？；,.!?\s]|了|啦)",
        ),
        ("pet", rf"我(?:们)?家(?:的|里的)?{_ZH_SPECIES}{_ZH_NAME}(?=现在|正在|正|每天|特别|很|$|[，。！？；,.!?])"),
        ("pet", rf"^{_ZH_NAME}是我(?:们家|家|的)(?:的)?(?:小)?{_ZH_SPECIES}"),
        (
            "pet",
            rf"{_ZH_WE}(?:家)?(?P<adds>还|也|又)?{_ZH_NOW}(?P<adds2>还|也|又)?(?:新)?(?:养了|领养了|收养了|买了|有|捡了|"
            rf"接回了|抱回了|带回了|迎来了|养|新来了|来了|多了)(?:一只|一条|只|条|个)(?:新的?)?(?:小)?{_ZH_SPECIES}"
            rf"(?:[，,]?(?:叫|名叫|取名叫?|起名叫?){_ZH_NAME}(?=$|[，。！？；,.!?\s]|了|啦))?",
        ),
        (
            "partner",
            rf"我(?:的)?(?:现在的|目前的)?(?:新)?(?P<rel>男朋友|女朋友|男友|女友|老公|老婆|丈夫|妻子|对象|未婚夫|未婚妻)"
            rf"(?:叫|名叫|是){_ZH_NAME}(?=$|[，。！？；,.!?\s]|了|啦)",
        ),
        ("partner", rf"我{_ZH_NOW}(?:和|跟){_ZH_NAME}{_ZH_NOW}(?:结婚|订婚|在一起|恋爱|谈恋爱|交往|同居)了"),
        (
            "partner",
            rf"我(?:和|跟)(?:我的?)?(?P<rel>男朋友|女朋友|男友|女友|老公|老婆|丈夫|妻子|对象){_ZH_NAME}(?=住|一起|在|[，。！？,.!?])",
        ),
        (
            "partner",
            rf"^{_ZH_NAME}是我(?:的)?(?:现在的)?(?:新)?(?P<rel>男朋友|女朋友|男友|女友|老公|老婆|丈夫|妻子|对象|未婚夫|未婚妻)",
        ),
        (
            "partner",
            rf"我{_ZH_NOW}(?:找了|交了|谈了|有了)(?:一个|一位|个|位)?(?:新)?(?:的)?(?P<rel>男朋友|女朋友|男友|女友|对象)"
            rf"[，,]?(?:叫|名叫|是){_ZH_NAME}(?=$|[，。！？；,.!?\s]|了|啦)",
        ),
        ("partner", rf"我{_ZH_NOW}(?:在)?(?:和|跟){_ZH_NAME}{_ZH_NOW}(?:约会|交往|谈恋爱)"),
        (
            "partner",
            rf"我{_ZH_NOW}(?:和|跟)(?:男朋友|女朋友|男友|女友|老公|老婆|对象)?(?:[{_HAN}]{{1,4}})?(?:分手|离婚)了",
        ),
        (
            "diet",
            rf"我{_ZH_NOW}(?:又|已经|也)?(?:开始|改成|改为|转为|决定|坚持|一直|变成|改|转)?(?:了)?"
            rf"(?P<v>吃素|吃全素|吃纯素|是素食者|是素食主义者|成了素食者|成为素食者|成了素食主义者|成为了素食主义者|素食)",
        ),
        ("diet", rf"我{_ZH_NOW}(?:又|已经|也)?(?:开始|恢复|重新|又开始|恢复了|重新开始)?(?P<v>吃肉)了"),
        ("diet", rf"我{_ZH_NOW}(?P<v>吃肉)(?=$|[，。！？；,.!?\s])"),
        ("diet", rf"我{_ZH_NOW}在(?:做|进行|坚持)?(?P<v>生酮|低碳水|无麸质)饮食"),
        (
            "car",
            rf"我(?:们)?{_ZH_NOW}(?:新)?(?:开|开的是|买了|换了|提了|入手了|开上了|换成了|换了台|买了台|订了|提车了)"
            rf"(?:一辆|辆|台|一台)?(?:新的?)?{_ZH_CARS}",
        ),
        ("car", rf"我(?:的)?(?:新)?车是(?:一辆)?{_ZH_CARS}"),
        (
            "school",
            rf"我{_ZH_NOW}(?:在|转学到了?|转到了?|考上了?|考进了?|考取了?|进了|进入了?|去了?|到了?|被)"
            rf"(?P<v>[{_HAN}]{{2,12}}?(?:大学|学院|中学|小学|高中|初中|学校))",
        ),
        (
            "school",
            rf"我{_ZH_NOW}是(?P<v>[{_HAN}]{{2,12}}?(?:大学|学院|中学|小学|高中|初中|学校))的(?:学生|研究生|本科生|大学生|博士生|新生)",
        ),
        ("allergy", rf"我对(?P<v>[{_HAN}]{{1,6}}?)过敏"),
        ("language", rf"我{_ZH_NOW}(?:会说|会讲|在学|学会了)(?P<v>[{_HAN}]{{1,4}}语|[{_HAN}]{{1,3}}文)"),
        ("name", rf"我叫(?P<v>[{_HAN}]{{2,4}})(?=$|[，。！？；,.!?\s])"),
    )
]
_MAYBE_ZH = re.compile(r"如果|要是|假如|打算|计划|准备|想要?|希望|梦想|考虑|也许|可能|不|没|别|吗|？|\?|以前|曾经|过去")
_ADDS_ZH = re.compile(r"还|也|又|另一|第二")
_GONE_ZH = re.compile(r"去世|走了|不在了|死了|没了|离开了|送人了|送走了|丢了|病逝")
_NAMED_LATER_ZH = re.compile(
    rf"(?:名字叫|起名叫|取名叫|起名为|取名为|起名|取名|叫做|叫)(?P<name>[{_HAN}A-Za-z]{{1,4}}?)(?=$|[，。！？；,.!?\s]|了|啦)"
)
_NOT_ZH_NAME = re.compile(r"[了的在是很都也又]|今天|昨天|现在|每天")
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

_HAN_CHAR = re.compile(f"[{_HAN}]")
_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]?")


def facts_of(user: str, text: str) -> list[Fact]:
    """What ``user`` states about themselves in ``text`` (their own message), in order; one per attribute and
    sentence, and of an attribute with one value only the last."""
    found: list[Fact] = []
    for sentence in _SENTENCE.findall(text):
        sentence = _carried(sentence)
        seen: set[str] = set()
        for attribute, pattern in (*_ENGLISH, *_CHINESE):
            if attribute in seen:
                continue
            match = pattern.search(sentence)
            if match is None or _hedged(sentence, match):
                continue
            fact = _fact(user, attribute, match, sentence, text)
            if fact is not None:
                found.append(fact)
                seen.add(attribute)
    # Of one attribute with one value, the message's last statement is what it says now ("I broke up with Leo. I'm
    # dating Tom now."): the earlier ones are left out.
    last = {fact.attribute: i for i, fact in enumerate(found) if replaces(fact.as_json())}
    return [fact for i, fact in enumerate(found) if not replaces(fact.as_json()) or last[fact.attribute] == i]


_CARRIES = re.compile(r"^我(?:们)?(?![姐妹哥弟妈爸父母儿女朋的家老同邻室])")
_NEXT_CLAUSE = re.compile(
    r"[，,](?=现在|目前|已经|刚刚|刚|最近|终于|总算|平时|一直|每天|这周|这个月|这学期|上个月|上周|上星期|昨天|今天|前几天|今年|去年)"
)


def _carried(sentence: str) -> str:
    """A Chinese sentence that starts with 我 keeps its subject into a clause that starts with when: "我转行了，现在在做
    护士" is read as "我转行了，我现在在做护士"."""
    if _CARRIES.match(sentence) is None:
        return sentence
    return _NEXT_CLAUSE.sub("，我", sentence)


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
    return (_MAYBE_ZH if _is_chinese(match) else _MAYBE_EN).search(clause) is not None


def _is_chinese(match: re.Match[str]) -> bool:
    return _HAN_CHAR.search(match.group(0)) is not None


def _clause_of(sentence: str, match: re.Match[str]) -> str:
    """The clause the statement is in: where "also", "还" or "又" make it an addition."""
    before = [m.end() for m in _CLAUSE.finditer(sentence, 0, match.start())]
    after = _CLAUSE.search(sentence, match.end())
    return sentence[before[-1] if before else 0 : after.start() if after else len(sentence)]


_CLAUSE = re.compile(r"[,，、:：;；]|\b(?:but|and|so|because|while|though|although)\b|但是?|而且|所以|因为|不过|可是")


def _fact(user: str, attribute: str, match: re.Match[str], sentence: str, text: str) -> Fact | None:
    groups = match.groupdict()
    chinese = _is_chinese(match)
    adds = any(groups.get(key) for key in ("adds", "adds2"))
    adds = adds or (_ADDS_ZH if chinese else _ADDS_EN).search(_clause_of(sentence, match)) is not None
    if attribute == "pet":
        species = groups["species"]
        species = _ZH_SPECIES_NAMES.get(species, _EN_SPECIES_NAMES.get(species, species))
        name = (groups.get("name") or "").strip()
        if not name:  # "we brought home a dog; her name is Felix", "新养了一只狗，给它起名叫旺财"
            later = (_NAMED_LATER_ZH if chinese else _NAMED_LATER_EN).search(sentence, match.end())
            name = later.group("name") if later else ""
        if name.lower() in _NOT_VALUES or (chinese and _NOT_ZH_NAME.search(name)):
            name = ""
        # "another dog" after the first one died replaces it: "Rex died, so I got another dog".
        adds = adds and (_GONE_ZH if chinese else _GONE_EN).search(text) is None
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
    if attribute == "residence" and _SCHOOL_WORD.search(shown):  # "I moved to Boston College": a school
        return None
    if attribute == "job" and chinese and ("的" in value or value in _ZH_NOT_JOBS):
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
