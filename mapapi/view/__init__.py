"""The map page, ``/view``: a browser client of the API that draws an
account's maps and follows their changes (``page`` serves it; its files are
``templates/view.html``, ``static/view.js`` and ``static/view.css``)."""
