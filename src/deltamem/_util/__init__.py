"""Ground-floor helpers, private to the library: cost accounting (:mod:`.usage`; ``Usage`` is
public as ``deltamem.Usage``), storable JSON (:mod:`.jsonsafe`), optional spans
(:mod:`.telemetry`), BLAS threads (:mod:`.threads`) and optional extras (:mod:`.extras`)."""
