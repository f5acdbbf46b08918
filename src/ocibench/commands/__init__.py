"""Sub-commands of ``ocibench``; each module has ``register(parser)`` and ``run(args)``."""
