"""Grading a class, stage by stage: intake, admission, sandbox, worker, verdicts, pipeline, reports."""
