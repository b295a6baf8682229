"""The ``mapapi`` commands, one module each: ``cli.py`` lists them and
imports only the one a command line names."""
