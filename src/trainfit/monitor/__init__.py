"""`monitor`: live NVML (and DCGM) view of the GPUs while a job runs, and a verdict at the end."""
