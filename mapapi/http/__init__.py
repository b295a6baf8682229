"""What every request passes on its way in and out: authentication, rate limits,
headers, bodies, errors and the access log."""
