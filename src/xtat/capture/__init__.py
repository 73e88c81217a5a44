"""What to tune, captured from the user's code: the `Workload`, how a call's arguments split and
travel, named dimensions and marks, the source program, and TARGET resolution."""
