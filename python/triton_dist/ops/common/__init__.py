"""Plumbing every op shares: input errors, the per-signature plan cache, the workspace and stream registry, the
launch of compiled kernels without Triton's generic path, and the device-side call epochs.

Each op package (``ops/<op>/``: kernels, selection, host op) builds on these; nothing here knows any one op.
"""
