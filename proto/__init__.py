"""The wire contract: ``.proto`` files, generated stubs, the tensor codec and the error table."""
