"""The Slack door: the bolt app (bot.py), its HTTP events route (events.py) served by the HTTP
host, Block Kit formatting (blocks.py) and pasted log files (files.py)."""
