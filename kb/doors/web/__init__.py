"""The web door: the JSON API (api.py) and the Gradio chat (chat.py) with its renderers
(render.py) and page assets (assets.py), mounted on the HTTP host by kb/doors/host/app.py."""
