"""Records and where they live: the typed records, the run directory, the cache, the one-record-per-sample ledger."""
