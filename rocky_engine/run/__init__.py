"""rocky run: planning, per-pipeline runners, concurrency, retries, breaker, RunOutput."""
