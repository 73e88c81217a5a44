"""Compiler stages of the XTAT-M formulation: runtime, program, passes, codegen."""
