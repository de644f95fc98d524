"""Stage 3 of the pipeline: critical path, category attribution, budget and what-if."""
