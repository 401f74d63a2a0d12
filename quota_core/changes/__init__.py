"""Changes: the only code that writes quotas.

The apply workflow (:mod:`.workflow`: preview, guarded apply, read-back, audit) and the
append-only audit log (:mod:`.audit`).

May import: the pure core and the backends. Never cli, ui, pages or pipeline (checked by
import-linter).
"""
