"""The contract kit's areas, one mixin class per module.

The public entry point is `asyncsession.testing.contract.SessionRepositoryContract`, which
combines them all.
"""
