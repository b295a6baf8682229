"""What views and commands do to the data, one module per concern.

Functions here may flush but never commit: the caller commits once.
"""
