"""Benchmarks of asyncsession against the peer session stores, side by side on one server.

``scripts/bench`` installs the peers into a separate ``.venv-bench`` and runs
``python -m benchmarks``; see ``docs/benchmarks.md``. The scenario functions in
:mod:`benchmarks.scenarios` take any :class:`~benchmarks.adapters.SessionStore`, so the smoke test
runs the asyncsession adapter through exactly the code the full run uses, without the peers
installed: peer adapters are imported only when a run asks for them.
"""
