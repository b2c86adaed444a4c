"""Input and wire formats: episodes from JSON (:mod:`.episodes`), episodes from chat transcripts
(:mod:`.transcripts`), the REST/CLI/MCP JSON models (:mod:`.api`) and a space as JSON Lines
(:mod:`.transfer`, export and import)."""
