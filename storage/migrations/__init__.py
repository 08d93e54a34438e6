"""Alembic migrations of the incident store, shipped inside the ``storage`` package.

``script_location = storage:migrations`` finds them in a source tree and in an
installed wheel alike; :mod:`storage.migrate` runs them from code.
"""
