"""What the HTTP doors share: one ASGI stack served by uvicorn (server.py), request body limits
(body.py), the Host/Origin guard (guard.py), logging (logs.py) and the index reload policy
(live.py); app.py composes the web and Slack doors on it and runs `kb serve` / `kb slack`."""
