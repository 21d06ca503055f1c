"""The configuration: config.yaml's schema, ${VAR} interpolation, aliases, generation settings, prompts, languages, secrets."""
