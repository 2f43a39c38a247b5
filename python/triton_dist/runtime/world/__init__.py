"""The world: ``init``/``finalize``, agreement between ranks, and barriers (host- and device-side)."""
