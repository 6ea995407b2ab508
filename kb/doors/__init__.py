"""The doors: the ways in to the knowledge base, each only turning requests into calls of the
core (kb/service.py) and its answers into its own format (kb/present.py decides what shows).

- cli.py: the terminal (`kb`);
- web/: the JSON API and the chat page;
- slack/: the Slack bot;
- host/: what the HTTP doors share: one ASGI stack (uvicorn, body limits, Host/Origin guard),
  logging and the index reload policy. `kb serve --slack` mounts both doors on it.
Doors never import each other; only host/app.py composes them.
"""
