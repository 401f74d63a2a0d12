"""``python -m pipeline`` runs the analysis job (same as ``python -m pipeline.analyze``)."""
import sys

from .analyze import main

sys.exit(main(sys.argv[1:]))
