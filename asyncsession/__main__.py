"""``python -m asyncsession``: the operator command line."""

from .cli import main

main()
