"""``python -m wfqueue``: the ``wfqueue`` command."""

from wfqueue.cli.entry import main

if __name__ == "__main__":
    main()
