"""Beat: the periodic maintenance of wfqueue.

``beat.app`` is the scheduler entry point (``celery -A beat.app beat`` or
``wfqueue beat``); ``beat.tasks.register`` adds the maintenance tasks to a
worker app; ``beat.timing`` holds every timing decision as a pure function.
"""
