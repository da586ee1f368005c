"""Where an Interactions stream names its model (the same-dialect fast path).

The lifecycle events carry the interaction resource: ``interaction.created`` and
``interaction.completed`` name it as ``interaction.model`` (``status_update`` and the ``step.*``
events name no model). The status is the stop reason and it comes in ``interaction.completed``,
right before ``[DONE]``: nothing is held back.
"""

from __future__ import annotations

from gateway.dialects.base import FastPathRules, ModelPlace

RULES = FastPathRules(ModelPlace("model", parent="interaction"))
