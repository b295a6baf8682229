"""OAuth 2.1 for hosted assistants: mapapi as the authorization server of
``/mcp``. Its pages, storage and rules live here; ``http.auth`` consults it
for an access token."""
