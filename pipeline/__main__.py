"""``python -m pipeline`` runs the analysis job (same as ``python -m pipeline.analyze``)."""
import sys

from pipeline.analyze import main

sys.exit(main(sys.argv[1:]))
