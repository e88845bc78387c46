"""The wfqueue command line, one module per command group."""
