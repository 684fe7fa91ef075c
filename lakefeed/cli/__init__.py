"""The ``lakefeed`` command line."""
