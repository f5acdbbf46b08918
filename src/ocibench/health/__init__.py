"""The node's health between jobs: ``ocibench healthcheck`` (Slurm's HealthCheckProgram)."""
