"""``python -m gnnstore`` runs the command line."""
from gnnstore.cli import main

main()
