"""What a run does, in order: plan, execution, Engines, the runner, and the watches kept while it runs."""
