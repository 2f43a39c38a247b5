"""The device context (docs/abi.md): its bytes, and writing them into every loaded Triton module."""
