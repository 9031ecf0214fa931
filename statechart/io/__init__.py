"""Charts and runs in and out: Mermaid diagrams, audit timelines, charts loaded by path."""
