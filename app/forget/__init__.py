"""Forgetting a user or a group: everything held about them is deleted, in the caller's tenant."""
