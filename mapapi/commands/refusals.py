"""The refusal every ``mapapi`` command shares: a setting, option, address
or database it cannot use, one line on stderr, exit status 2.

It lives below the command group (``cli``) and the commands alike, so that
each imports it downward.
"""

import click


class SettingRefused(click.ClickException):
    """A setting, option, address or database the command cannot use: exit 2."""

    exit_code = 2
