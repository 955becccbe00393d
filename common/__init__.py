"""What client, server and stores share without the wire: the error family, the row-copy kernel."""
