"""`xtat bench`: a tuning campaign over the model suite, its roofline and its report.

`campaign` runs it (tune, explain, place on the roofline), `roofline` measures
this machine's peaks once and places workloads under them, `report` turns the
result into an `xtat.report.Report`, `cli` is the command.
"""
