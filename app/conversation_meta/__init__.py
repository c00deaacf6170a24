"""Conversation metadata: scene, participants and tags of a group, upserted by group_id."""
