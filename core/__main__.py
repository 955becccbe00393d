"""``python -m gnnstore`` runs the command line."""
from gnnstore.cli import main

if __name__ == "__main__":
    main()
