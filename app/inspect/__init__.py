"""The web inspector (GET /inspect): a page a person uses to look inside one tenant's memory."""
