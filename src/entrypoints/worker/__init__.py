"""The job worker: its jobs, its process, the supervisor that runs it under `serve`, and the
scheduler's side of scheduled tasks."""
