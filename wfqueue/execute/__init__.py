"""Executing a plan's tasks: one typed model of the plan (``model``), loading any plan format into it (``load``,
``plan_context``), refusing a plan that cannot run (``validate``), the pure schedule (``schedule``), the gate
commands (``gate``), and the checks made before anything runs (``safety``, ``executors``).
"""
