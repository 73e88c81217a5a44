"""`xtat profile`: the programs a script compiles through jax, and their share of its time."""
