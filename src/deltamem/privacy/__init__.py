"""Secrets: redaction of every episode, root and import before anything is stored or sent
(:mod:`.redact`), and the in-place scrub of a database written before (:mod:`.scrub`)."""
