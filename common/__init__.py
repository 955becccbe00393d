"""What client, server and stores share without the wire: errors, the attr schema, type keys, the row-copy kernel."""
