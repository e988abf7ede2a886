"""The whole tool from outside: the CLI, the lab in a box, hostile input, interrupts, the docs' commands."""
