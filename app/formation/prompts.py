"""The prompts of memory formation, in the conversation's language (English or Chinese).

The JSON keys are the same in both languages; only the instructions and the written memories differ.
"""

from __future__ import annotations

BOUNDARY = {
    "en": """You split a chat into episodes. An episode is one topic, activity or exchange.
Decide whether the NEW message starts a new episode instead of continuing the current one. Consider the
topic, the participants and the time that passed. Answer with JSON only:
{"should_end": true or false, "reasoning": "one short sentence", "topic_summary": "one sentence summing up
the current episode (the messages before the new one)"}
should_end = true means the current episode ends before the new message.""",
    "zh": """你负责把聊天记录切分成情节。一个情节是一个话题、一次活动或一段连续的交流。
判断“新消息”是开始了一个新情节，还是延续当前情节。请考虑话题、参与者和间隔的时间。只输出 JSON：
{"should_end": true 或 false, "reasoning": "一句简短的理由",
 "topic_summary": "用一句中文概括当前情节（新消息之前的消息）"}
should_end 为 true 表示当前情节在新消息之前结束。""",
}

BOUNDARY_INPUT = {
    "en": "Current episode:\n{transcript}\n\nTime since its last message: {gap}\n\nNEW message:\n{new}",
    "zh": "当前情节：\n{transcript}\n\n距上一条消息的时间：{gap}\n\n新消息：\n{new}",
}

EXTRACTION = {
    "en": """You turn one episode of a conversation into long-term memories. Write every text in English.
Use absolute dates: resolve relative times ("tomorrow", "next week") against the message times.
Refer to people by their names, in the third person. Answer with JSON only, in exactly this shape:
{
  "title": "a short title of the episode",
  "summary": "one or two sentences",
  "content": "a third-person narrative of the episode with absolute dates,
              e.g. 'On 15 Jan 2025 Zhang San proposed ...'",
  "personal_episodes": [{"user_id": "...", "title": "...", "summary": "...",
                         "content": "the episode from this participant's point of view: what they said, did,
                                     decided and learned, third person"}],
  "event_log": [{"time": "ISO 8601 date-time or YYYY-MM-DD", "fact": "one atomic, self-contained fact",
                 "user_id": "the participant the fact is about, or null", "source_message_ids": ["..."]}],
  "semantic_memories": [{"content": "a forward-looking implication: a plan, commitment, preference or state
                         that will matter later", "valid_from": "YYYY-MM-DD", "valid_to": "YYYY-MM-DD",
                         "user_id": "the participant it is about, or null", "source_message_ids": ["..."]}]
}
Give one personal episode for each participant. Cite the message ids each fact comes from.""",
    "zh": """你把一段对话情节整理成长期记忆。所有文字都用中文书写。
使用绝对日期：把“明天”“下周”等相对时间按消息的时间换算成具体日期。
用第三人称、用人名指代参与者。只输出 JSON，严格采用以下结构（键名保持英文）：
{
  "title": "情节的简短标题",
  "summary": "一两句话的概要",
  "content": "带绝对日期的第三人称叙述，例如“2025年1月15日，张三提出……”",
  "personal_episodes": [{"user_id": "...", "title": "...", "summary": "...",
                         "content": "从该参与者的角度叙述本情节：其所说、所做、所决定和所得知的（第三人称）"}],
  "event_log": [{"time": "ISO 8601 时间或 YYYY-MM-DD", "fact": "一条独立的原子事实",
                 "user_id": "事实所涉及的参与者，或 null", "source_message_ids": ["..."]}],
  "semantic_memories": [{"content": "面向未来的推论：计划、承诺、偏好或今后仍然重要的状态",
                         "valid_from": "YYYY-MM-DD", "valid_to": "YYYY-MM-DD",
                         "user_id": "所涉及的参与者，或 null", "source_message_ids": ["..."]}]
}
为每个参与者各写一条 personal_episodes。注明每条事实来自哪些消息 id。""",
}

PERSONAL = {
    "en": """You write personal memories of one episode of a conversation. Write every text in English, with
absolute dates and in the third person. For EACH of these participants: {users}, write the episode from
that participant's point of view: what they said, did, decided and learned. Answer with JSON only:
{{"personal_episodes": [{{"user_id": "...", "title": "...", "summary": "...", "content": "..."}}]}}""",
    "zh": """你为一段对话情节撰写个人记忆。所有文字都用中文书写，使用绝对日期和第三人称。为以下每位参与者：{users}，
从其本人的角度叙述本情节：其所说、所做、所决定和所得知的。只输出 JSON（键名保持英文）：
{{"personal_episodes": [{{"user_id": "...", "title": "...", "summary": "...", "content": "..."}}]}}""",
}

PROFILE = {
    "en": """You maintain a profile of each participant of a conversation. Merge what this episode reveals
into each previous profile: keep what still holds, update what changed, add what is new; never invent.
Write the values in English. Fields for this scene: {fields}. Answer with JSON only:
{{"profiles": [{{"user_id": "...", "profile": {{"name": "...", "summary": "one sentence", {example}}}}}]}}""",
    "zh": """你为对话的每位参与者维护一份画像。把本情节透露的信息合并进之前的画像：保留仍然成立的，更新已变化的，
补充新的；不要编造。值用中文书写。本场景的字段：{fields}。只输出 JSON（键名保持英文）：
{{"profiles": [{{"user_id": "...", "profile": {{"name": "...", "summary": "一句话概括", {example}}}}}]}}""",
}

CONTEXT = {
    "en": "Conversation: {where} (scene: {scene})\nTime zone: {zone}\nParticipants:\n{participants}",
    "zh": "对话：{where}（场景：{scene}）\n时区：{zone}\n参与者：\n{participants}",
}

MESSAGES_HEADER = {"en": "Messages:", "zh": "消息："}
PREVIOUS_PROFILES_HEADER = {"en": "Previous profiles:", "zh": "之前的画像："}

RECONCILIATION = (
    "You keep a person's long-term memory true. You are given a NEW fact and EARLIER memories about a person, "
    "numbered.\n"
    'Answer "supersede" ONLY when the NEW fact gives a DIFFERENT value of the SAME property of the SAME person as '
    "one earlier memory, so that memory is no longer true (the person moved to another city, changed jobs, their "
    "pet died and another came, a new partner, a new diet). Give that memory's number.\n"
    'Answer "duplicate" when the NEW fact says what an earlier memory says (the same value again); give its number.\n'
    'Answer "keep" in every other case: the NEW fact adds something, is about another property, or is about '
    "someone else (a sister, a friend, a colleague). When in doubt, answer keep.\n"
    "Examples:\n"
    "EARLIER 1. Bob lives in Rome. NEW: Bob moved to Oslo. -> supersede 1\n"
    "EARLIER 1. Bob lives in Rome. NEW: Bob's brother moved to Oslo. -> keep\n"
    "EARLIER 1. Bob lives in Rome. NEW: Bob still lives in Rome. -> duplicate 1\n"
    "EARLIER 1. Bob lives in Rome. 2. Bob is a baker. NEW: Bob started learning the piano. -> keep\n"
    "EARLIER 1. Bob lives in Rome. 2. Bob is a baker. NEW: Bob now works as a pilot. -> supersede 2\n"
    'Answer as JSON: {"reasoning": "...", "decision": "keep" | "supersede" | "duplicate", "memory": <number or null>}.'
)
RECONCILIATION_INPUT = "NEW fact ({when}): {fact}\n\nEARLIER memories:\n{earlier}"

AGENT_CASE = {
    "en": """You record how an AI agent handled one task, so that it can reuse the approach. From the session below
(the user's request, the agent's tool calls and their results, its answer), write: task_intent, what the user wanted
(one sentence); approach, the steps the agent took and the tools it called, in order (one or two sentences);
quality_score, from 0 to 1, how well the task was done (0: failed or abandoned; 1: fully and correctly done);
key_insight, the one thing worth remembering for a similar task (or null). Answer with JSON only:
{"task_intent": "...", "approach": "...", "quality_score": 0.0, "key_insight": "..."}""",
    "zh": """你记录一个 AI 智能体如何完成一项任务，以便日后复用其做法。根据下面的会话
（用户的请求、智能体的工具调用及结果、它的回答），写出：task_intent，用户想要什么（一句话）；
approach，智能体按顺序采取的步骤和调用的工具（一两句话）；quality_score，0 到 1，任务完成得如何
（0：失败或放弃；1：完整正确地完成）；key_insight，对类似任务最值得记住的一点（或 null）。
只输出 JSON（键名保持英文）：
{"task_intent": "...", "approach": "...", "quality_score": 0.0, "key_insight": "..."}""",
}
