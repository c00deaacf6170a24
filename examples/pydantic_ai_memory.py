"""A pydantic-ai agent with memsys as its long-term memory: it remembers what the user says in one conversation
and finds it again in the next, which starts with no message history.

    MEMSYS_BASE_URL=http://127.0.0.1:1995 MEMSYS_API_KEY=msk_… \
    OPENAI_BASE_URL=https://… OPENAI_API_KEY=… OPENAI_MODEL=gpt-4o-mini \
    python examples/pydantic_ai_memory.py

Any OpenAI-compatible chat-completions server that supports tool calls will do.
"""

import asyncio
import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from memsys import AsyncMemsys
from memsys.integrations.pydantic_ai import MemsysToolset

model = OpenAIChatModel(os.environ.get("OPENAI_MODEL", "gpt-4o-mini"), provider=OpenAIProvider())
agent = Agent(model, instructions="You are a friendly cooking assistant. Answer in one or two sentences.")


async def main() -> None:
    async with AsyncMemsys() as memsys:  # MEMSYS_BASE_URL, MEMSYS_API_KEY
        memory = MemsysToolset(memsys, user_id="alice", group_id="kitchen-chat")

        first = await agent.run("Hi! I am vegetarian and allergic to peanuts.", toolsets=[memory])
        print("1:", first.output)

        # A new conversation: no message history, what the agent knows of Alice comes from memsys.
        second = await agent.run("Suggest a snack for me.", toolsets=[memory])
        print("2:", second.output)
        parts = [part for message in second.new_messages() for part in message.parts]
        print("tools called:", [part.tool_name for part in parts if part.part_kind == "tool-call"])


if __name__ == "__main__":
    asyncio.run(main())
