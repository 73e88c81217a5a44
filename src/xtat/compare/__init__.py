"""`xtat compare`: search strategies side by side on workloads at equal budget.

`runner` runs the campaign (one independent, resumable store per run),
`analysis` computes every number from the recorded histories, `report`
turns the analysis into tables and a report document, `cli` is the command.
"""
