"""The web console (``GET /ui``): static page and assets in static/, its admin endpoints in routes.py."""
