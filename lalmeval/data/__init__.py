"""Reading datasets of every layout into samples: tables, hub repos, folders, filters and the selection."""
