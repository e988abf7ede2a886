"""Scripts kept with the harness that are not part of its package (tools/gpu_check)."""
