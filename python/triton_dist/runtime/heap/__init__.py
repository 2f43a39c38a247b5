"""The symmetric heap: every rank's memory mapped in every process, an offset allocator, and tensors on it."""
