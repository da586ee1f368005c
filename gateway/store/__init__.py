"""What outlives one request: stored objects and event logs (see ``gateway.store.base``)."""

from gateway.store.base import Liveness, LogClosed, LogStatus, OwnerGone, Store, StoreError
from gateway.store.open import open_store

__all__ = ["Liveness", "LogClosed", "LogStatus", "OwnerGone", "Store", "StoreError", "open_store"]
